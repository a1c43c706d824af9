// Package eventsource reads server-sent events (the client side of
// text/event-stream, as a browser's EventSource does): model providers'
// streams and remote A2A agents' streams.
package eventsource

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// ErrLineTooLong is returned for an SSE line, or an event's data, over
// the reader's limit.
var ErrLineTooLong = errors.New("server-sent event line too long")

// maxDrain bounds what Drain reads.
const maxDrain = 64 << 10

// Reader reads server-sent events line by line (wire.md §1.3): comment
// lines are skipped, data lines of one event are joined with "\n", an event
// ends at a blank line and is returned only when it has data; an unfinished
// event at EOF is dropped. Get one with NewReader and give it back with
// Release.
type Reader struct {
	br    *bufio.Reader
	name  []byte // the current event's name ("event:" field)
	data  []byte // the current event's data
	long  []byte // a line longer than br's buffer
	owned bool   // from the pool
	max   int    // the longest line (and event data) taken
}

var readerPool = sync.Pool{New: func() any { return &Reader{br: bufio.NewReaderSize(nil, 8<<10)} }}

// NewReader returns a reader of body's events, from a pool; a line, or an
// event's data, longer than max bytes is ErrLineTooLong.
func NewReader(body io.Reader, max int) *Reader {
	r := readerPool.Get().(*Reader)
	r.br.Reset(body)
	r.owned, r.max = true, max
	return r
}

// Release gives the reader back to the pool; it must not be used after.
func (r *Reader) Release() {
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
func (r *Reader) Next() (name, data []byte, err error) {
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
			if len(r.data)+len(value) > r.max {
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

// Drain reads what is left of the stream (at most 64 KiB), so that closing
// the body returns the connection to the idle pool instead of closing it:
// after a stream's last event the chunked terminator is often still in
// flight. Call it only once the stream is known to be over.
func (r *Reader) Drain() { _, _ = io.CopyN(io.Discard, r.br, maxDrain) }

// line returns the next line without its line ending; the last line of a
// stream comes with io.EOF.
func (r *Reader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
			if len(r.long) > r.max {
				return nil, ErrLineTooLong
			}
		}
		line = r.long
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, err
}
