// Package modeltest serves scripted mock model upstreams over real HTTP. A
// mock answers each request from a script (package script) in the real wire
// format of the provider it imitates (OpenAI Chat Completions or Anthropic
// Messages), streamed or not, so the real HTTP providers can be tested
// end to end. Every request is recorded, decoded into canonical messages.
//
//	srv := modeltest.NewOpenAI(t, script.MustParse(`[{"reply":{"text":"hi"}}]`))
//	p := openai.New(openai.Config{BaseURL: srv.URL()})
//
// Handler gives the same mock as a plain http.Handler, for serving it from a
// separate process (crash tests).
//
// Every mock also answers OpenAI's POST /v1/embeddings with deterministic
// embeddings (Embed: a hashed bag of words), recorded apart (Embeddings).
package modeltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/script"
)

// Kind is the wire format a mock speaks.
type Kind string

// The wire formats.
const (
	// OpenAI serves POST /v1/chat/completions (and /chat/completions).
	OpenAI Kind = "openai"
	// Anthropic serves POST /v1/messages.
	Anthropic Kind = "anthropic"
)

// ParseKind checks a wire format name ("openai" or "anthropic").
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case OpenAI, Anthropic:
		return k, nil
	}
	return "", fmt.Errorf("modeltest: unknown wire format %q (want openai or anthropic)", s)
}

// RecordedRequest is one request a mock received.
type RecordedRequest struct {
	// Seq numbers requests from 1 in arrival order.
	Seq    int
	Method string
	Path   string
	// Query is the raw query string (Azure's api-version).
	Query  string
	Header http.Header
	// Body is the raw JSON body.
	Body json.RawMessage
	// Stream is the request's "stream" flag.
	Stream bool
	// Request is the body decoded into canonical form (what the script saw):
	// system messages are folded into System, tool messages get ToolName
	// from the call they answer, messages have no IDs.
	Request model.Request
	// Status is the HTTP status the mock answered with.
	Status int
}

// Mock is a scripted upstream; it is an http.Handler.
type Mock struct {
	kind Kind

	mu         sync.Mutex
	script     *script.Script
	reqs       []RecordedRequest
	embeds     []RecordedRequest
	failN      int
	failStatus int
	failHeader http.Header
	failWhen   *script.When // nil: any request
	hold       *hold
	stall      *hold
	brk        *breakAt
}

// Fault is how BreakOnce breaks a streamed answer.
type Fault int

// The faults.
const (
	// Cut closes the connection in the middle of the stream, without its
	// end (a reset connection, a proxy that dropped it): the caller reads
	// an unexpected end of the body.
	Cut Fault = iota + 1
	// Stall keeps the connection open and sends nothing more until the
	// caller goes away (an upstream stuck in the middle of an answer).
	Stall
)

// breakAt is one armed BreakOnce.
type breakAt struct {
	when  script.When
	after int
	fault Fault
}

// hold is one armed HoldOnce.
type hold struct {
	when script.When
	gate chan struct{}
	once sync.Once
}

// Handler returns a mock upstream speaking kind and answering from s. It
// panics on an unknown kind (see ParseKind).
func Handler(kind Kind, s *script.Script) *Mock {
	if _, err := ParseKind(string(kind)); err != nil {
		panic(err)
	}
	return &Mock{kind: kind, script: s}
}

// SetScript replaces the script for the following requests.
func (m *Mock) SetScript(s *script.Script) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.script = s
}

// FailNext makes the next n requests fail with status (e.g. 503 or 429) and
// the provider's error envelope, before the script is consulted.
func (m *Mock) FailNext(n, status int) { m.FailNextWith(n, status, nil) }

// FailNextWith is FailNext with response headers on each failure (e.g.
// retry-after on a 429).
func (m *Mock) FailNextWith(n, status int, h http.Header) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failN, m.failStatus, m.failHeader, m.failWhen = n, status, h, nil
}

// FailWhen is FailNextWith for the next n requests that meet when (e.g. the
// model call after a tool ran: When{LastTool: "get_weather"}); other
// requests are answered as usual.
func (m *Mock) FailWhen(when script.When, n, status int, h http.Header) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failN, m.failStatus, m.failHeader, m.failWhen = n, status, h, &when
}

// Stall makes every request that meets when, until release is called,
// answer 200 with a stream's headers and then send nothing: an upstream
// that accepted the call and stalls. A stalled request ends, with nothing
// more, when its caller goes away or at release; later requests are then
// answered as usual.
func (m *Mock) Stall(when script.When) (release func()) {
	h := &hold{when: when, gate: make(chan struct{})}
	m.mu.Lock()
	m.stall = h
	m.mu.Unlock()
	return func() {
		h.once.Do(func() { close(h.gate) })
		m.mu.Lock()
		if m.stall == h {
			m.stall = nil
		}
		m.mu.Unlock()
	}
}

// BreakOnce makes the streamed answer to the next request that meets when
// break with fault after its first after pieces of the answer (text
// fragments and tool call deltas; 0: right after the stream's first event,
// before any of the answer). The request is recorded with status 200; later
// requests are answered as usual. Calling BreakOnce again replaces a break
// no request has taken yet. An answer that is not streamed is not broken.
func (m *Mock) BreakOnce(when script.When, after int, fault Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.brk = &breakAt{when: when, after: after, fault: fault}
}

// HoldOnce makes the next request that meets when wait, once recorded
// (Count and Requests include it), until release is called or its caller
// goes away (the request's context ends, e.g. the server process calling it
// was killed). Requests that do not match, and later matching ones, are
// answered as usual. It is the gate for tests that need a model call under
// way (a run in progress, a process killed mid-call) without a timed delay.
// Calling HoldOnce again replaces a hold no request has taken yet.
func (m *Mock) HoldOnce(when script.When) (release func()) {
	h := &hold{when: when, gate: make(chan struct{})}
	m.mu.Lock()
	m.hold = h
	m.mu.Unlock()
	return func() { h.once.Do(func() { close(h.gate) }) }
}

// Requests returns a copy of every request received so far, in order.
func (m *Mock) Requests() []RecordedRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// Count returns the number of requests received so far.
func (m *Mock) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

// Last returns the last request received; ok is false if there was none.
func (m *Mock) Last() (r RecordedRequest, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.reqs) == 0 {
		return RecordedRequest{}, false
	}
	return m.reqs[len(m.reqs)-1], true
}

// ServeHTTP answers one request.
func (m *Mock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/embeddings") {
		m.serveEmbeddings(w, r)
		return
	}
	if !m.routes(r.URL.Path) {
		m.writeError(w, http.StatusNotFound, "no route for "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		m.writeError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		m.writeError(w, http.StatusBadRequest, "cannot read body")
		return
	}
	rec := RecordedRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: bytes.Clone(body)}
	var wr wireRequest
	if m.kind == OpenAI {
		wr, err = decodeOpenAI(body)
	} else {
		wr, err = decodeAnthropic(body)
	}
	rec.Stream, rec.Request = wr.stream, wr.req

	m.mu.Lock()
	s := m.script
	failed := m.failN > 0 && (m.failWhen == nil || (err == nil && m.failWhen.Matches(wr.req)))
	if failed {
		m.failN--
		rec.Status = m.failStatus
	}
	var rep script.Reply
	var repErr error
	switch {
	case failed:
	case err != nil:
		rec.Status = http.StatusBadRequest
	default:
		rep, repErr = s.Reply(wr.req)
		switch {
		case repErr != nil:
			rec.Status = http.StatusBadRequest
		case rep.Error != nil:
			rec.Status = rep.Error.Status
		default:
			rec.Status = http.StatusOK
		}
	}
	var gate, stall chan struct{}
	if h := m.hold; h != nil && !failed && err == nil && h.when.Matches(wr.req) {
		gate, m.hold = h.gate, nil
	}
	if h := m.stall; h != nil && !failed && err == nil && h.when.Matches(wr.req) {
		stall = h.gate
	}
	var brk *breakAt
	if b := m.brk; b != nil && !failed && err == nil && wr.stream && rec.Status == http.StatusOK && b.when.Matches(wr.req) {
		brk, m.brk = b, nil
	}
	failHeader := m.failHeader
	rec.Seq = len(m.reqs) + 1
	m.reqs = append(m.reqs, rec)
	m.mu.Unlock()

	if stall != nil {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-stall:
		case <-r.Context().Done():
		}
		return
	}
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}

	switch {
	case failed:
		for k, v := range failHeader {
			w.Header()[k] = v
		}
		m.writeError(w, rec.Status, fmt.Sprintf("mock upstream: injected failure (%d)", rec.Status))
		return
	case err != nil:
		m.writeError(w, http.StatusBadRequest, err.Error())
		return
	case repErr != nil:
		m.writeError(w, http.StatusBadRequest, repErr.Error())
		return
	}
	if !pause(r.Context(), rep.Delay) {
		return
	}
	if rep.Error != nil {
		m.writeError(w, rep.Error.Status, rep.Error.Message)
		return
	}
	model := wr.req.Model
	id := fmt.Sprintf("%s-mock-%d", map[Kind]string{OpenAI: "chatcmpl", Anthropic: "msg"}[m.kind], rec.Seq)
	switch {
	case m.kind == OpenAI && wr.stream:
		streamOpenAI(r.Context(), newSSE(w, brk), id, model, rep, wr.includeUsage)
	case m.kind == OpenAI:
		writeJSON(w, http.StatusOK, openAICompletion(id, model, rep))
	case wr.stream:
		streamAnthropic(r.Context(), newSSE(w, brk), id, model, rep, wr.thinking)
	default:
		writeJSON(w, http.StatusOK, anthropicMessage(id, model, rep, wr.thinking))
	}
}

func (m *Mock) routes(path string) bool {
	if m.kind == OpenAI {
		// Any base path: OpenAI's /v1, Azure's deployments, Gemini's /v1beta/openai.
		return strings.HasSuffix(path, "/chat/completions")
	}
	return path == "/v1/messages"
}

func (m *Mock) writeError(w http.ResponseWriter, status int, msg string) {
	if m.kind == OpenAI {
		writeJSON(w, status, map[string]any{"error": map[string]any{
			"message": msg, "type": openAIErrorType(status), "param": nil, "code": nil,
		}})
		return
	}
	writeJSON(w, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": anthropicErrorType(status), "message": msg},
		"request_id": "req_mock",
	})
}

func openAIErrorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func anthropicErrorType(status int) string {
	switch status {
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 409:
		return "conflict_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 500:
		return "api_error"
	case 504:
		return "timeout_error"
	case 503, 529:
		return "overloaded_error"
	default:
		if status >= 500 {
			return "api_error"
		}
		return "invalid_request_error"
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// sse writes server-sent events, flushing after each, and breaks the
// stream where brk says (nil: never).
type sse struct {
	w      http.ResponseWriter
	f      *http.ResponseController
	brk    *breakAt
	pieces int // pieces of the answer sent
}

func newSSE(w http.ResponseWriter, brk *breakAt) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, f: http.NewResponseController(w), brk: brk}
}

// piece sends an event that carries a piece of the answer (a text
// fragment, a tool call delta).
func (s *sse) piece(ctx context.Context, name string, data any) bool {
	if !s.send(name, data) {
		return false
	}
	s.pieces++
	return s.check(ctx)
}

// check breaks the stream, once its break point is reached: it reports
// false when the stream is to end (stalled until ctx ended); a Cut does
// not return.
func (s *sse) check(ctx context.Context) bool {
	if s.brk == nil || s.pieces < s.brk.after {
		return true
	}
	fault := s.brk.fault
	s.brk = nil
	if fault == Cut {
		// net/http closes the connection without the chunked body's end.
		panic(http.ErrAbortHandler)
	}
	<-ctx.Done()
	return false
}

// event sends an event that is not a piece of the answer; a break after 0
// pieces happens right after the first one.
func (s *sse) event(ctx context.Context, name string, data any) bool {
	return s.send(name, data) && (s.brk == nil || s.brk.after > 0 || s.check(ctx))
}

// send writes one event (name may be empty for data-only events).
func (s *sse) send(name string, data any) bool {
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	default:
		var err error
		if b, err = json.Marshal(d); err != nil {
			return false
		}
	}
	var buf bytes.Buffer
	if name != "" {
		buf.WriteString("event: " + name + "\n")
	}
	buf.WriteString("data: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	if _, err := s.w.Write(buf.Bytes()); err != nil {
		return false
	}
	return s.f.Flush() == nil
}

// pause waits d; it reports false if ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Server is a mock upstream listening on a local port for one test.
type Server struct {
	*Mock
	srv   *httptest.Server
	conns atomic.Int64
}

// NewOpenAI starts a mock OpenAI upstream answering from s; it is closed
// when the test ends.
func NewOpenAI(t testing.TB, s *script.Script) *Server { return newServer(t, OpenAI, s) }

// NewAnthropic starts a mock Anthropic upstream answering from s; it is
// closed when the test ends.
func NewAnthropic(t testing.TB, s *script.Script) *Server { return newServer(t, Anthropic, s) }

func newServer(t testing.TB, kind Kind, s *script.Script) *Server {
	t.Helper()
	m := Handler(kind, s)
	srv := &Server{Mock: m, srv: httptest.NewUnstartedServer(m)}
	srv.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			srv.conns.Add(1)
		}
	}
	srv.srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// Conns returns the number of TCP connections the mock accepted so far: a
// provider that reuses its connections opens one for sequential calls.
func (s *Server) Conns() int { return int(s.conns.Load()) }

// URL returns the base URL as the provider's SDK wants it: ".../v1" for
// OpenAI, the bare root for Anthropic (its SDK appends "/v1/messages").
func (s *Server) URL() string {
	if s.kind == OpenAI {
		return s.srv.URL + "/v1"
	}
	return s.srv.URL
}

// Close stops the server now (it is also closed when the test ends), so a
// test can see how a provider handles an upstream that went away.
// Streams in progress are cut off.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}
