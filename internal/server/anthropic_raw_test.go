package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/stacktest"
)

// antPost sends a raw Messages request as an old (0.x) client would, unless
// hdr overrides the headers.
func antPost(t *testing.T, url string, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func antBody(text string, extra string) string {
	b, _ := json.Marshal(text)
	return `{"model":"assistant","max_tokens":256,"messages":[{"role":"user","content":` + string(b) + `}]` + extra + `}`
}

var startKeys = stacktest.Options{Mode: config.Start, Keys: []config.Key{{Tenant: "acme", Secret: "acme-secret-1"}}}

func TestAnthropicRawVersionsAndKeys(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, startKeys)
	for _, h := range []map[string]string{
		{"x-api-key": "acme-secret-1"}, // SDK 0.x
		{"Authorization": "Bearer acme-secret-1", "anthropic-version": "2026-10-21"}, // SDK 1.x / Go v2
		{"x-api-key": "acme-secret-1", "anthropic-version": "2099-01-01", "anthropic-beta": "made-up-beta,another"},
	} {
		resp, b := antPost(t, env.URL+"/v1/messages?beta=true", antBody("hello", ""), h)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%v: %d %q %s", h, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		var msg map[string]any
		if err := json.Unmarshal(b, &msg); err != nil || msg["type"] != "message" || msg["stop_sequence"] != nil {
			t.Fatalf("body %s", b)
		}
		usage := msg["usage"].(map[string]any)
		for _, k := range []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"} {
			if _, ok := usage[k]; !ok {
				t.Fatalf("usage lacks %s: %s", k, b)
			}
		}
		if resp.Header.Get("request-id") == "" {
			t.Fatal("no request-id header")
		}
	}
}

type sseFrame struct {
	event string
	raw   string
	data  map[string]any
}

// readFrames parses an SSE body, failing on any frame without an event line
// (keepalive comments are skipped).
func readFrames(t *testing.T, body []byte) []sseFrame {
	t.Helper()
	var out []sseFrame
	for _, chunk := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		if strings.HasPrefix(chunk, ": ") && !strings.Contains(chunk, "\n") {
			continue
		}
		var f sseFrame
		sc := bufio.NewScanner(strings.NewReader(chunk))
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				f.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				f.raw = strings.TrimPrefix(line, "data: ")
				if err := json.Unmarshal([]byte(f.raw), &f.data); err != nil {
					t.Fatalf("data is not JSON: %q", line)
				}
			default:
				t.Fatalf("unexpected line %q", line)
			}
		}
		if f.event == "" || f.data == nil {
			t.Fatalf("frame without an event: line or data: %q", chunk)
		}
		if f.data["type"] != f.event {
			t.Fatalf("event %q carries type %v", f.event, f.data["type"])
		}
		out = append(out, f)
	}
	return out
}

// checkBlocks checks the stream's order rules and returns the started
// blocks' types in index order.
func checkBlocks(t *testing.T, fs []sseFrame) []string {
	t.Helper()
	if fs[0].event != "message_start" || fs[len(fs)-1].event != "message_stop" || fs[len(fs)-2].event != "message_delta" {
		t.Fatalf("stream starts with %q and ends with %q, %q", fs[0].event, fs[len(fs)-2].event, fs[len(fs)-1].event)
	}
	var types []string
	open := map[int]bool{}
	for _, f := range fs {
		switch f.event {
		case "message_start":
			m := f.data["message"].(map[string]any)
			if !strings.HasPrefix(m["id"].(string), "msg_") || len(m["content"].([]any)) != 0 || m["stop_reason"] != nil {
				t.Fatalf("message_start %s", f.raw)
			}
			if u := m["usage"].(map[string]any); u["input_tokens"].(float64) < 1 {
				t.Fatalf("message_start usage %s", f.raw)
			}
		case "content_block_start":
			idx := int(f.data["index"].(float64))
			if idx != len(types) {
				t.Fatalf("block %d started, want %d (no gaps)", idx, len(types))
			}
			types = append(types, f.data["content_block"].(map[string]any)["type"].(string))
			open[idx] = true
		case "content_block_delta", "content_block_stop":
			idx := int(f.data["index"].(float64))
			if !open[idx] {
				t.Fatalf("%s for block %d, which is not open", f.event, idx)
			}
			if f.event == "content_block_stop" {
				open[idx] = false
			}
		case "message_delta":
			if _, ok := f.data["usage"].(map[string]any)["output_tokens"]; !ok {
				t.Fatalf("message_delta without usage.output_tokens: %s", f.raw)
			}
		}
	}
	return types
}

func TestAnthropicRawStreamFrames(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	resp, b := antPost(t, env.URL+"/v1/messages", antBody("weather in Paris?", `,"stream":true`), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if bytes.Contains(b, []byte("[DONE]")) {
		t.Fatal("an Anthropic stream has no [DONE]")
	}
	fs := readFrames(t, b)
	if got := strings.Join(checkBlocks(t, fs), ","); got != "text,text" {
		t.Fatalf("blocks %s", got)
	}
	for _, f := range fs {
		if f.event == "message_delta" && f.data["delta"].(map[string]any)["stop_reason"] != "end_turn" {
			t.Fatalf("message_delta %s", f.raw)
		}
	}

	// A paused approval: a text block saying what waits (clients that do
	// not own the call have something to show), then the pending call as a
	// tool_use block.
	resp, b = antPost(t, env.URL+"/v1/messages", antBody("refund my order", `,"stream":true`), map[string]string{"x-stackbone-session": "raw-refund"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	fs = readFrames(t, b)
	if got := strings.Join(checkBlocks(t, fs), ","); got != "text,tool_use" {
		t.Fatalf("blocks %s", got)
	}
	var partial, note strings.Builder
	for _, f := range fs {
		switch f.event {
		case "content_block_start":
			if f.data["content_block"].(map[string]any)["type"] == "text" {
				continue
			}
			if !strings.Contains(f.raw, `"input":{}`) || !strings.Contains(f.raw, `"name":"refund"`) {
				t.Fatalf("tool_use start %s", f.raw)
			}
		case "content_block_delta":
			d := f.data["delta"].(map[string]any)
			if d["type"] == "text_delta" {
				note.WriteString(d["text"].(string))
				continue
			}
			if d["type"] != "input_json_delta" {
				t.Fatalf("delta %s", f.raw)
			}
			partial.WriteString(d["partial_json"].(string))
		case "message_delta":
			if f.data["delta"].(map[string]any)["stop_reason"] != "tool_use" {
				t.Fatalf("message_delta %s", f.raw)
			}
		}
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(partial.String()), &args); err != nil || args["orderId"] != "ord_42" {
		t.Fatalf("partial_json %q", partial.String())
	}
	if !strings.HasPrefix(note.String(), "Waiting for approval: ") {
		t.Fatalf("the paused turn's text %q", note.String())
	}
}

// antErr checks an Anthropic error envelope and returns its inner error.
func antErr(t *testing.T, resp *http.Response, b []byte, status int, typ string) map[string]any {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("want %d JSON, got %d %q: %s", status, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var env struct {
		Type      string         `json:"type"`
		Error     map[string]any `json:"error"`
		RequestID string         `json:"request_id"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.Type != "error" || env.Error == nil {
		t.Fatalf("not an Anthropic error envelope: %s", b)
	}
	if env.Error["type"] != typ || env.Error["message"] == "" {
		t.Fatalf("want type %s: %s", typ, b)
	}
	if env.RequestID == "" || env.RequestID != resp.Header.Get("request-id") {
		t.Fatalf("request_id %q vs header %q", env.RequestID, resp.Header.Get("request-id"))
	}
	return env.Error
}

func errorCode(e map[string]any) any {
	d, _ := e["details"].(map[string]any)
	return d["error_code"]
}

func TestAnthropicRawErrorEnvelopes(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	url := env.URL + "/v1/messages"

	resp, b := antPost(t, url, `{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`, nil)
	if e := antErr(t, resp, b, 400, "invalid_request_error"); !strings.Contains(e["message"].(string), "max_tokens") {
		t.Fatalf("missing max_tokens: %s", b)
	}

	resp, b = antPost(t, url, strings.Replace(antBody("hi", ""), `"assistant"`, `"nobody"`, 1), nil)
	if e := antErr(t, resp, b, 404, "not_found_error"); errorCode(e) != "model_not_found" {
		t.Fatalf("unknown agent: %s", b)
	}

	// A paused session answers 409 approval_pending, not to be retried.
	hdr := map[string]string{"x-stackbone-session": "raw-pending"}
	if resp, b = antPost(t, url, antBody("refund my order", ""), hdr); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	before := env.Upstream.Count()
	resp, b = antPost(t, url, antBody("anyone there?", ""), hdr)
	e := antErr(t, resp, b, 409, "invalid_request_error")
	if errorCode(e) != "approval_pending" || resp.Header.Get("x-should-retry") != "false" ||
		e["message"] != "This conversation is waiting on a human decision. Resolve it before sending a new message." {
		t.Fatalf("approval pending: %v %s", resp.Header, b)
	}
	if env.Upstream.Count() != before {
		t.Fatal("the refused call reached the model")
	}
}

func TestAnthropicRaw401InStartMode(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, startKeys)
	resp, b := antPost(t, env.URL+"/v1/messages", antBody("hi", ""), nil)
	antErr(t, resp, b, 401, "authentication_error")
	resp, b = antPost(t, env.URL+"/v1/messages", antBody("hi", ""), map[string]string{"x-api-key": "wrong-key"})
	if e := antErr(t, resp, b, 401, "authentication_error"); !strings.Contains(e["message"].(string), "Invalid API key") {
		t.Fatalf("wrong key: %s", b)
	}
}

func TestAnthropicRaw413(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{MaxBodyBytes: 2048})
	resp, b := antPost(t, env.URL+"/v1/messages", antBody(strings.Repeat("x", 4096), ""), nil)
	if e := antErr(t, resp, b, 413, "request_too_large"); errorCode(e) != "request_too_large" {
		t.Fatalf("oversized: %s", b)
	}
	if env.Upstream.Count() != 0 {
		t.Fatal("oversized request reached the model")
	}
}

func TestAnthropicRawCountTokens(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	count := func(body string) int {
		t.Helper()
		resp, b := antPost(t, env.URL+"/v1/messages/count_tokens", body, nil)
		var res struct {
			InputTokens int `json:"input_tokens"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &res) != nil || res.InputTokens < 1 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return res.InputTokens
	}
	plain := count(`{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`)
	withMore := count(`{"model":"assistant","system":"` + strings.Repeat("s", 400) + `","messages":[{"role":"user","content":"hi"}],
	  "tools":[{"name":"lookup","description":"` + strings.Repeat("d", 400) + `","input_schema":{"type":"object"}}]}`)
	if withMore < plain+200 {
		t.Fatalf("system and tools not counted: %d vs %d", withMore, plain)
	}
	resp, b := antPost(t, env.URL+"/v1/messages/count_tokens", `{"model":"assistant"}`, nil)
	antErr(t, resp, b, 400, "invalid_request_error")
}

// An image sent as base64 reaches the model as an image part.
func TestAnthropicRawImage(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	body := `{"model":"assistant","max_tokens":64,"messages":[{"role":"user","content":[
	  {"type":"text","text":"describe"},
	  {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`
	if resp, b := antPost(t, env.URL+"/v1/messages", body, nil); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	last, _ := env.Upstream.Last()
	m := last.Request.Messages[0]
	if m.Content != "describe" || len(m.Parts) != 1 || m.Parts[0].MediaType != "image/png" || m.Parts[0].Data != "iVBORw0KGgo=" {
		t.Fatalf("upstream message %+v", m)
	}
}

// A slow turn gets event: ping keepalives between message_start and
// message_stop, and the SDK still accumulates the stream.
func TestAnthropicRawPingKeepalive(t *testing.T) {
	env := stacktest.New(t, stacktest.Options{KeepAliveInterval: 20 * time.Millisecond, Script: `[{"reply":{"text":"slow answer","chunkDelayMs":120}}]`})
	resp, b := antPost(t, env.URL+"/v1/messages", antBody("hi", `,"stream":true`), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	fs := readFrames(t, b)
	checkBlocks(t, fs)
	// Keepalives are comments while message_start waits for the input
	// count (this upstream reports it when the step ends), pings after.
	pings := strings.Count(string(b), ": ping\n\n")
	for _, f := range fs {
		if f.event == "ping" {
			pings++
		}
	}
	if pings == 0 {
		t.Fatalf("no ping in %s", b)
	}

	c := antClient(env)
	msg := antStream(t, c, antParams(antUser("hi")))
	if got := blocksOf(&msg); got != "text:slow answer" {
		t.Fatalf("accumulated %q", got)
	}
}
