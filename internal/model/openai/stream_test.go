package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/openai"
)

// upstream is a hand-driven Chat Completions endpoint: answer writes the
// response to request number n (from 1).
type upstream struct {
	URL   string
	count atomic.Int32
}

func newUpstream(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *upstream {
	t.Helper()
	u := &upstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "no route", http.StatusNotFound)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		answer(int(u.count.Add(1)), w, r)
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL + "/v1"
	return u
}

func (u *upstream) requests() int { return int(u.count.Load()) }

// sse writes raw event-stream text and flushes it.
func sse(w http.ResponseWriter, raw string) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
	}
	_, _ = io.WriteString(w, raw)
	_ = http.NewResponseController(w).Flush()
}

// data is one data-only event carrying a chunk with delta and finish.
func data(delta, finish string) string {
	return fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}],"usage":null}`+"\n\n", delta, finish)
}

const (
	usageEvent = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}` + "\n\n"
	doneEvent  = "data: [DONE]\n\n"
)

func hi() model.Request {
	return model.Request{Model: "m", Messages: []message.Message{{Role: message.User, Content: "hi"}}}
}

func provider(url string) *openai.Provider {
	return openai.New(openai.Config{BaseURL: url, APIKey: "sk-test", Retry: modeltest.FastRetry})
}

func modelError(t *testing.T, err error) *model.Error {
	t.Helper()
	var me *model.Error
	if !errors.As(err, &me) {
		t.Fatalf("got %T %v, want *model.Error", err, err)
	}
	return me
}

// Keepalive comments, CRLF line endings, event/id/retry fields and a JSON
// object split over two data lines are all read as the SSE rules say.
func TestSSEFraming(t *testing.T) {
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sse(w, ": keepalive\n\n")
		sse(w, data(`{"role":"assistant","content":""}`, "null"))
		sse(w, ":ping\r\n\r\n")
		sse(w, strings.ReplaceAll(data(`{"content":"Hel"}`, "null"), "\n", "\r\n"))
		sse(w, "event: message\nid: 7\nretry: 1000\n"+data(`{"content":"lo"}`, "null"))
		sse(w, "data: {\"choices\":[{\"index\":0,\n"+`data: "delta":{"content":" world"},"finish_reason":null}]}`+"\n\n")
		sse(w, data(`{}`, `"stop"`)+usageEvent+doneEvent)
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if err != nil {
		t.Fatal(err)
	}
	if st.Text != "Hello world" || st.Stop != event.StopEnd || st.Chunks[model.Text] != 3 {
		t.Fatalf("text %q in %d chunks, stop %q", st.Text, st.Chunks[model.Text], st.Stop)
	}
	if st.Usage != (event.Usage{InputTokens: 7, OutputTokens: 5}) {
		t.Fatalf("usage %+v", st.Usage)
	}
}

// [DONE] ends the stream: nothing after it is read.
func TestDoneEndsStream(t *testing.T) {
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sse(w, data(`{"content":"ok"}`, `"length"`)+doneEvent+"data: {not json\n\n")
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if err != nil {
		t.Fatal(err)
	}
	if st.Text != "ok" || st.Stop != event.StopLength {
		t.Fatalf("text %q stop %q", st.Text, st.Stop)
	}
}

// Like the SDKs, a stream that ends without [DONE] is accepted once it gave
// a finish reason; without one it is a 502.
func TestStreamEnd(t *testing.T) {
	t.Run("finish without DONE", func(t *testing.T) {
		u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			sse(w, data(`{"content":"ok"}`, "null")+data(`{}`, `"stop"`))
		})
		st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
		if err != nil || st.Text != "ok" || st.Stop != event.StopEnd {
			t.Fatalf("text %q stop %q err %v", st.Text, st.Stop, err)
		}
	})
	t.Run("no finish reason", func(t *testing.T) {
		u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			sse(w, data(`{"content":"ok"}`, "null")+doneEvent)
		})
		_, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
		if me := modelError(t, err); me.Status != http.StatusBadGateway || !strings.Contains(me.Message, "without a finish reason") {
			t.Fatalf("got %v", err)
		}
	})
}

// An {"error": …} event inside a 200 stream is a 502 with the upstream's
// message; after a delivered chunk it is not retried.
func TestInStreamError(t *testing.T) {
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sse(w, data(`{"content":"par"}`, "null"))
		sse(w, `data: {"error":{"message":"model overloaded","type":"server_error","param":null,"code":null}}`+"\n\n")
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	me := modelError(t, err)
	if me.Status != http.StatusBadGateway || !strings.Contains(me.Message, "model overloaded") {
		t.Fatalf("got %v", err)
	}
	if st.Text != "par" || u.requests() != 1 {
		t.Fatalf("text %q after %d requests", st.Text, u.requests())
	}
}

// An error event before any chunk is retried like any 5xx.
func TestInStreamErrorBeforeChunkIsRetried(t *testing.T) {
	u := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			sse(w, data(`{"role":"assistant","content":""}`, "null")+`data: {"error":"busy"}`+"\n\n")
			return
		}
		sse(w, data(`{"content":"second"}`, `"stop"`)+doneEvent)
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if err != nil || st.Text != "second" || u.requests() != 2 {
		t.Fatalf("text %q err %v after %d requests", st.Text, err, u.requests())
	}
}

// A chunk that is not JSON is an unreadable answer (502).
func TestMalformedChunk(t *testing.T) {
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sse(w, data(`{"content":"a"}`, "null")+"data: {\"choices\":[{\"index\":0,\"delta\":\n\n"+doneEvent)
	})
	_, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if me := modelError(t, err); me.Status != http.StatusBadGateway || !strings.Contains(me.Message, "unreadable") {
		t.Fatalf("got %v", err)
	}
	if u.requests() != 1 {
		t.Fatalf("retried after a chunk: %d requests", u.requests())
	}
}

// A 503 with a body that is not the OpenAI envelope (a proxy page) keeps
// its status, so it is retried; the next attempt succeeds.
func TestRetry503ThenSuccess(t *testing.T) {
	u := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "<html>try later</html>")
			return
		}
		sse(w, data(`{"content":"fine"}`, `"stop"`)+doneEvent)
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if err != nil || st.Text != "fine" || u.requests() != 2 {
		t.Fatalf("text %q err %v after %d requests", st.Text, err, u.requests())
	}
}

// Error answers keep their status and the message of the envelope, in the
// OpenAI shape or the bare-string shape Ollama uses; 4xx are not retried.
func TestErrorAnswers(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   string
	}{
		{400, `{"error":{"message":"messages: invalid","type":"invalid_request_error","param":null,"code":null}}`, "messages: invalid"},
		{404, `{"error":"model \"llama9\" not found, try pulling it first"}`, `model "llama9" not found`},
		{401, `{"error":{"message":"","type":"invalid_request_error"}}`, "Unauthorized"},
		{403, `forbidden by proxy`, "Forbidden"},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			})
			_, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
			me := modelError(t, err)
			if me.Status != c.status || !strings.Contains(me.Message, c.want) {
				t.Fatalf("got status %d message %q, want %d %q", me.Status, me.Message, c.status, c.want)
			}
			if u.requests() != 1 {
				t.Fatalf("%d requests", u.requests())
			}
		})
	}
}

// When the upstream dies after a chunk was delivered, the step fails with a
// connection error and is not sent again.
func TestNoRetryAfterChunk(t *testing.T) {
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sse(w, data(`{"content":"half"}`, "null"))
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	me := modelError(t, err)
	if me.Status != 0 || st.Text != "half" || u.requests() != 1 {
		t.Fatalf("status %d text %q after %d requests (%v)", me.Status, st.Text, u.requests(), err)
	}
}

// Cancelling the context mid-stream ends the step with ctx.Err().
func TestCancelMidStream(t *testing.T) {
	u := newUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		sse(w, data(`{"content":"first"}`, "null"))
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	for c, e := range provider(u.URL).Stream(ctx, hi()) {
		if e != nil {
			err = e
			break
		}
		if c.Type == model.Text {
			cancel()
		}
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// Tool-call deltas: id and name come once, arguments in fragments; servers
// that send no id get one; a new id on a reused index starts a new call.
func TestToolCallDeltas(t *testing.T) {
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sse(w, data(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null"))
		sse(w, data(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null"))
		sse(w, data(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null"))
		sse(w, data(`{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`, "null"))
		sse(w, data(`{"tool_calls":[{"index":1,"type":"function","function":{"name":"no_id","arguments":"{}"}}]}`, "null"))
		sse(w, data(`{}`, `"stop"`)+doneEvent)
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if err != nil {
		t.Fatal(err)
	}
	c := st.ToolCalls
	if len(c) != 3 || st.Stop != event.StopToolCalls {
		t.Fatalf("calls %+v stop %q", c, st.Stop)
	}
	if c[0].ID != "call_a" || c[0].Name != "get_weather" || c[0].Arguments != `{"city":"Paris"}` {
		t.Fatalf("first call %+v", c[0])
	}
	if c[1].ID != "call_b" || c[1].Name != "get_time" || c[1].Arguments != "{}" {
		t.Fatalf("second call %+v", c[1])
	}
	if !strings.HasPrefix(c[2].ID, "call_") || len(c[2].ID) != len("call_")+16 || c[2].Name != "no_id" {
		t.Fatalf("third call %+v", c[2])
	}
}

// A data line longer than the read buffer arrives whole.
func TestLongLine(t *testing.T) {
	long := strings.Repeat("é", 100_000)
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		b, _ := json.Marshal(map[string]string{"content": long})
		sse(w, data(string(b), "null")+data(`{}`, `"stop"`)+doneEvent)
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if err != nil || st.Text != long {
		t.Fatalf("got %d bytes, err %v", len(st.Text), err)
	}
}

// roundTripFunc records the requests a provider sends without a network.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The endpoint is the base URL plus "/chat/completions", whether or not the
// base ends in a slash; no base URL means the OpenAI API.
func TestBaseURL(t *testing.T) {
	for base, want := range map[string]string{
		"":                          "https://api.openai.com/v1/chat/completions",
		"http://127.0.0.1:11434/v1": "http://127.0.0.1:11434/v1/chat/completions",
		"http://gw.local/openai/":   "http://gw.local/openai/chat/completions",
		"http://gw.local":           "http://gw.local/chat/completions",
	} {
		var got string
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = r.URL.String()
			body := data(`{"content":"x"}`, `"stop"`) + doneEvent
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
				Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		})}
		p := openai.New(openai.Config{BaseURL: base, HTTPClient: hc, Retry: modeltest.FastRetry})
		if _, err := modeltest.Collect(p.Stream(context.Background(), hi())); err != nil {
			t.Fatalf("%q: %v", base, err)
		}
		if got != want {
			t.Fatalf("base %q: posted to %q, want %q", base, got, want)
		}
	}
	p := openai.New(openai.Config{BaseURL: "127.0.0.1:11434/v1"})
	if _, err := modeltest.Collect(p.Stream(context.Background(), hi())); err == nil {
		t.Fatal("a base URL without scheme was accepted")
	}
}

// A tool whose parameters are not a JSON object schema fails the step
// before anything is sent.
func TestInvalidToolParameters(t *testing.T) {
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sse(w, data(`{}`, `"stop"`)+doneEvent)
	})
	req := hi()
	req.Tools = []model.ToolDef{{Name: "broken", Parameters: json.RawMessage(`["not","an","object"]`)}}
	_, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), req))
	if err == nil || !strings.Contains(err.Error(), "tool broken: parameters") || u.requests() != 0 {
		t.Fatalf("got %v after %d requests", err, u.requests())
	}
}

// An OpenAI-compatible server's reasoning (DeepSeek's, vLLM's and LM
// Studio's reasoning_content, OpenRouter's reasoning) comes as one
// plain-text Reasoning block, before the text it preceded or the call it
// preceded (AfterCalls counts the calls before it); a chunk with the same
// text in both fields counts once.
func TestReasoningContent(t *testing.T) {
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		sse(w, data(`{"role":"assistant","content":null,"reasoning_content":"Let me "}`, "null"))
		sse(w, data(`{"content":null,"reasoning_content":"think."}`, "null"))
		sse(w, data(`{"content":"Hi"}`, "null"))
		sse(w, data(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`, "null"))
		sse(w, data(`{"reasoning":"Now the ","reasoning_details":[{"type":"reasoning.text","text":"Now the "}]}`, "null"))
		sse(w, data(`{"reasoning":"time.","reasoning_content":"time."}`, "null"))
		sse(w, data(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`, "null"))
		sse(w, data(`{"reasoning_content":"Done."}`, "null"))
		sse(w, data(`{}`, `"tool_calls"`)+doneEvent)
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if err != nil {
		t.Fatal(err)
	}
	want := []message.Reasoning{
		{Type: message.ReasoningText, Text: "Let me think.", Source: "openai"},
		{Type: message.ReasoningText, Text: "Now the time.", AfterCalls: 1, Source: "openai"},
		{Type: message.ReasoningText, Text: "Done.", AfterCalls: 2, Source: "openai"},
	}
	if !reflect.DeepEqual(st.Reasoning, want) || st.Text != "Hi" || len(st.ToolCalls) != 2 {
		t.Fatalf("reasoning %+v text %q calls %+v", st.Reasoning, st.Text, st.ToolCalls)
	}
	if st.Chunks[model.Alive] != 0 {
		t.Fatalf("%d Alive chunks reached the caller", st.Chunks[model.Alive])
	}
}

// Reasoning longer than message.MaxReasoningText is kept cut, with the
// marker at its end.
func TestReasoningContentBounded(t *testing.T) {
	piece := strings.Repeat("ü", 1000) // 2,000 bytes
	u := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		b, _ := json.Marshal(map[string]string{"reasoning_content": piece})
		for range 40 {
			sse(w, data(string(b), "null"))
		}
		sse(w, data(`{"content":"ok"}`, "null")+data(`{}`, `"stop"`)+doneEvent)
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Reasoning) != 1 {
		t.Fatalf("reasoning %d blocks", len(st.Reasoning))
	}
	r := st.Reasoning[0].Text
	if len(r) > message.MaxReasoningText || !strings.HasSuffix(r, message.ReasoningTruncated) || !utf8.ValidString(r) ||
		!strings.HasPrefix(r, piece) {
		t.Fatalf("reasoning of %d bytes ends %q", len(r), r[max(0, len(r)-40):])
	}
}

// A failure while the model only reasoned is retried: nothing of it reached
// the caller, and the answer holds the second attempt's reasoning alone.
func TestReasoningContentRetried(t *testing.T) {
	u := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			sse(w, data(`{"reasoning_content":"half a thought"}`, "null"))
			sse(w, `data: {"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}`+"\n\n")
			return
		}
		sse(w, data(`{"reasoning_content":"a whole thought"}`, "null")+data(`{"content":"ok"}`, `"stop"`)+doneEvent)
	})
	st, err := modeltest.Collect(provider(u.URL).Stream(context.Background(), hi()))
	if err != nil {
		t.Fatal(err)
	}
	if u.requests() != 2 || len(st.Reasoning) != 1 || st.Reasoning[0].Text != "a whole thought" || st.Restarts != 0 {
		t.Fatalf("%d requests, reasoning %+v, %d restarts", u.requests(), st.Reasoning, st.Restarts)
	}
}
