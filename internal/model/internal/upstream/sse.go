package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// maxLine bounds one SSE line (and one event's data), as the SDKs' scanners
// did.
const maxLine = 32 << 20

// ErrLineTooLong is returned for an SSE line, or an event's data, over 32 MiB.
var ErrLineTooLong = errors.New("server-sent event line too long")

// SSEReader reads server-sent events line by line (wire.md §1.3): comment
// lines are skipped, data lines of one event are joined with "\n", an event
// ends at a blank line and is returned only when it has data; an unfinished
// event at EOF is dropped. Get one with NewSSEReader and give it back with
// Release.
type SSEReader struct {
	br    *bufio.Reader
	name  []byte // the current event's name ("event:" field)
	data  []byte // the current event's data
	long  []byte // a line longer than br's buffer
	owned bool   // from the pool
}

var readerPool = sync.Pool{New: func() any { return &SSEReader{br: bufio.NewReaderSize(nil, 8<<10)} }}

// NewSSEReader returns a reader of body's events, from a pool.
func NewSSEReader(body io.Reader) *SSEReader {
	r := readerPool.Get().(*SSEReader)
	r.br.Reset(body)
	r.owned = true
	return r
}

// Release gives the reader back to the pool; it must not be used after.
func (r *SSEReader) Release() {
	if !r.owned {
		return
	}
	r.owned = false
	r.br.Reset(nil)
	for _, b := range []*[]byte{&r.long, &r.data, &r.name} {
		if cap(*b) > 64<<10 {
			*b = nil
		}
	}
	readerPool.Put(r)
}

// Next returns the name ("" when the event has none) and the data of the
// next event, both valid until the following call; io.EOF at the end of the
// stream.
func (r *SSEReader) Next() (name, data []byte, err error) {
	r.data, r.name = r.data[:0], r.name[:0]
	hasData := false
	for {
		line, err := r.line()
		if err != nil && (err != io.EOF || len(line) == 0) {
			return nil, nil, err
		}
		if len(line) == 0 {
			if hasData {
				return r.name, r.data, nil
			}
			r.name = r.name[:0] // an event without data is not dispatched
			continue
		}
		if line[0] == ':' { // a comment, e.g. a keepalive
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		switch string(field) {
		case "data":
			if hasData {
				r.data = append(r.data, '\n')
			}
			if len(r.data)+len(value) > maxLine {
				return nil, nil, ErrLineTooLong
			}
			r.data = append(r.data, value...)
			hasData = true
		case "event":
			r.name = append(r.name[:0], value...)
		}
		if err == io.EOF {
			return nil, nil, io.EOF
		}
	}
}

// Drain reads what is left of the stream (see Drain), so that closing the
// body returns the connection to the pool.
func (r *SSEReader) Drain() { Drain(r.br) }

// line returns the next line without its line ending; the last line of a
// stream comes with io.EOF.
func (r *SSEReader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
			if len(r.long) > maxLine {
				return nil, ErrLineTooLong
			}
		}
		line = r.long
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, err
}
