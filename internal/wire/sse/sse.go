// Package sse writes Server-Sent Events: LF-only frames, flushed one by one
// (or, from a buffered writer, a burst at a time), with keepalives from a
// ticker. It is safe for concurrent use so keepalives can interleave with
// events.
package sse

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// WriteTimeout is how long a frame of a hijacked stream may take to reach
// the client's socket; a client that stops reading is cut off then.
const WriteTimeout = 10 * time.Second

// idleBuf is the largest frame buffer a hijacked stream keeps between
// frames: an idle stream should not hold the memory of its largest event.
const idleBuf = 1 << 10

// Writer writes SSE frames to a response.
type Writer struct {
	mu       sync.Mutex
	w        http.ResponseWriter
	f        http.Flusher
	buffered bool
	started  bool
	buf      []byte
	err      error
	// conn is the connection once Hijack took it over from net/http;
	// chunk is its reused output buffer (a frame in HTTP/1.1 chunk form).
	conn  net.Conn
	chunk []byte
	// gone is closed when the hijacked connection's read side ends: the
	// client hung up (nil before Hijack).
	gone chan struct{}
}

// New prepares w for an event stream. Headers are sent with the first frame;
// each frame is flushed as it is written.
func New(w http.ResponseWriter) *Writer {
	f, _ := w.(http.Flusher)
	return &Writer{w: w, f: f}
}

// NewBuffered is New for a writer whose frames reach the client at the next
// Flush (or comment), so a burst of events goes out in one write: the turn
// loop flushes whenever the run has no further event ready.
func NewBuffered(w http.ResponseWriter) *Writer {
	s := New(w)
	s.buffered = true
	return s
}

// Flush sends the frames written so far; it returns the error of a failed
// write, if any.
func (s *Writer) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && s.started && s.f != nil {
		s.f.Flush()
	}
	return s.err
}

func (s *Writer) begin() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// Start sends the stream's headers now, before any frame, for a stream
// that may have nothing to send for a while (a replay that starts at or
// past the last event): the client knows at once that its stream is open.
func (s *Writer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.begin()
	if s.conn == nil && s.f != nil {
		s.f.Flush()
	}
	return nil
}

// Started reports whether the stream's headers were sent.
func (s *Writer) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// Data writes "data: <b>\n\n". b must be one line.
func (s *Writer) Data(b []byte) error { return s.frame("", "", b) }

// Event writes "event: <name>\ndata: <b>\n\n".
func (s *Writer) Event(name string, b []byte) error { return s.frame(name, "", b) }

// IDData writes "id: <id>\ndata: <b>\n\n".
func (s *Writer) IDData(id string, b []byte) error { return s.frame("", id, b) }

func (s *Writer) frame(name, id string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.begin()
	s.buf = s.buf[:0]
	if name != "" {
		s.buf = append(s.buf, "event: "...)
		s.buf = append(s.buf, name...)
		s.buf = append(s.buf, '\n')
	}
	if id != "" {
		s.buf = append(s.buf, "id: "...)
		s.buf = append(s.buf, id...)
		s.buf = append(s.buf, '\n')
	}
	s.buf = append(s.buf, "data: "...)
	s.buf = append(s.buf, b...)
	s.buf = append(s.buf, '\n', '\n')
	return s.write(!s.buffered)
}

// Comment writes ": <text>\n\n" (a keepalive every SSE parser skips).
func (s *Writer) Comment(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.begin()
	s.buf = append(s.buf[:0], ": "...)
	s.buf = append(s.buf, text...)
	s.buf = append(s.buf, '\n', '\n')
	return s.write(true)
}

func (s *Writer) write(flush bool) error {
	if s.conn != nil {
		return s.writeChunk()
	}
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = err
		return err
	}
	if flush && s.f != nil {
		s.f.Flush()
	}
	return nil
}

// KeepAlive calls ping every interval until the returned stop is called.
// stop returns once no ping runs any more (a ping in flight ends first), so
// a handler that calls it before returning never has its response written
// after it returned.
func KeepAlive(interval time.Duration, ping func()) (stop func()) {
	t := time.NewTicker(interval)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-t.C:
				ping()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { t.Stop(); close(done) })
		<-exited
	}
}

// Frames is where a wire's stream encoder writes (an *sse.Writer): data
// lines, named events, and comments (keepalives every SSE parser skips).
type Frames interface {
	Data(b []byte) error
	Event(name string, b []byte) error
	Comment(text string) error
}

var _ Frames = (*Writer)(nil)

// Hijack takes the stream's connection over from net/http once its headers
// are out, so that a long-lived stream holds neither net/http's goroutines
// nor its read and write buffers: from then on each frame goes straight to
// the connection as an HTTP/1.1 chunk, written within WriteTimeout, and
// Close ends the body and the connection. The client cannot tell. A client
// that hangs up is noticed at once: a read of the connection ends, and
// Gone is closed (the stream's owner stops, freeing the connection's slot,
// rather than at the next keepalive). It reports
// false, changing nothing, where the stream cannot be hijacked: HTTP/2 and
// HTTP/1.0 requests, a buffered writer, a writer that is no connection.
func (s *Writer) Hijack(r *http.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.conn != nil || s.buffered || s.f == nil ||
		r.ProtoMajor != 1 || r.ProtoMinor < 1 || r.Method != http.MethodGet {
		return false
	}
	s.begin()
	s.f.Flush() // the headers and every frame so far, as chunks
	conn, _, err := http.NewResponseController(s.w).Hijack()
	if err != nil {
		return false
	}
	// net/http's buffers are dropped with the handler: a request the
	// client pipelined behind an endless stream is never answered anyway.
	s.conn, s.w, s.f, s.buf = conn, nil, nil, nil
	s.gone = make(chan struct{})
	go watchHangUp(conn, s.gone)
	return true
}

// watchHangUp reads conn until its read side ends (the client closed it,
// or Close did) and then closes gone. Bytes a client sends on an event
// stream (a pipelined request) are discarded.
func watchHangUp(conn net.Conn, gone chan struct{}) {
	defer close(gone)
	_ = conn.SetReadDeadline(time.Time{})
	var b [64]byte
	for {
		if _, err := conn.Read(b[:]); err != nil {
			return
		}
	}
}

// Gone is closed once the client of a hijacked stream hung up; before
// Hijack, and for a stream that was not hijacked, it is nil (never
// ready: net/http ends the request's context instead).
func (s *Writer) Gone() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

// writeChunk writes s.buf as one chunk of the hijacked connection, in one
// write: the size line, the frame and its CRLF. Buffers grown past idleBuf
// by a large frame are let go after it.
func (s *Writer) writeChunk() error {
	out := strconv.AppendInt(s.chunk[:0], int64(len(s.buf)), 16)
	out = append(out, '\r', '\n')
	out = append(out, s.buf...)
	out = append(out, '\r', '\n')
	s.chunk = out
	if cap(out) > idleBuf {
		s.buf, s.chunk = nil, nil
	}
	_ = s.conn.SetWriteDeadline(time.Now().Add(WriteTimeout))
	if _, err := s.conn.Write(out); err != nil {
		s.err = err
		return err
	}
	return nil
}

// errClosed is the error of frames written after Close.
var errClosed = errors.New("sse: stream closed")

// Close ends a hijacked stream: it writes the end of the chunked body and
// closes the connection. On a stream net/http still serves it does
// nothing: the handler's return ends that one.
func (s *Writer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || errors.Is(s.err, errClosed) {
		return nil
	}
	if s.err == nil {
		_ = s.conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = s.conn.Write([]byte("0\r\n\r\n"))
	}
	s.err = errClosed
	return s.conn.Close()
}
