package server

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/wire/openai"
)

// TestOpenAIIncompleteRunGuard: a run whose events end without a terminal
// event gets an error on the OpenAI stream (incomplete_run), as on the
// other wires, instead of a stream that just stops without [DONE]; and a
// non-stream turn gets the error response.
func TestOpenAIIncompleteRunGuard(t *testing.T) {
	s := &Server{}
	w := openai.NewWire(time.Now)
	cut := func(yield func(event.Event) bool) {
		_ = yield(event.Event{Type: event.RunStarted}) && yield(event.Event{Type: event.TextDelta, MessageID: "m1", Delta: "half an ans"})
	}

	turn, err := w.DecodeTurn(httptest.NewRequest("POST", "/v1/chat/completions", nil),
		[]byte(`{"model":"assistant","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	if err := s.Encode(turn.Encoder(rec, nil), cut); err != nil {
		t.Fatalf("a stream reports in-stream, got %v", err)
	}
	body := rec.Body.String()
	last := body[strings.LastIndex(strings.TrimSuffix(body, "\n\n"), "data: "):]
	if !strings.Contains(body, `"content":"half an ans"`) || !strings.Contains(last, `"code":"incomplete_run"`) || !strings.Contains(last, `"type":"server_error"`) {
		t.Fatalf("stream:\n%s", body)
	}

	turn, err = w.DecodeTurn(httptest.NewRequest("POST", "/v1/chat/completions", nil),
		[]byte(`{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	if err := s.Encode(turn.Encoder(rec, nil), cut); err == nil || !strings.Contains(err.Error(), "The run ended without an answer.") || rec.Body.Len() != 0 {
		t.Fatalf("non-stream: err %v, body %q", err, rec.Body)
	}
}
