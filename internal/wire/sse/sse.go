// Package sse writes Server-Sent Events: LF-only frames, flushed one by one
// (or, from a buffered writer, a burst at a time), with keepalives from a
// ticker. It is safe for concurrent use so keepalives can interleave with
// events.
package sse

import (
	"net/http"
	"sync"
	"time"
)

// Writer writes SSE frames to a response.
type Writer struct {
	mu       sync.Mutex
	w        http.ResponseWriter
	f        http.Flusher
	buffered bool
	started  bool
	buf      []byte
	err      error
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
func KeepAlive(interval time.Duration, ping func()) (stop func()) {
	t := time.NewTicker(interval)
	done := make(chan struct{})
	go func() {
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
	return func() { once.Do(func() { t.Stop(); close(done) }) }
}

// Frames is where a wire's stream encoder writes (an *sse.Writer): data
// lines, named events, and comments (keepalives every SSE parser skips).
type Frames interface {
	Data(b []byte) error
	Event(name string, b []byte) error
	Comment(text string) error
}

var _ Frames = (*Writer)(nil)
