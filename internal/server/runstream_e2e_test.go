package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	assestream "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// reloadAnswer is what the assistant answers the held turn of these tests.
const reloadAnswer = "echo: tell me a long story"

// runStream is a GET of a run's stream read to its end.
type runStream struct {
	status int
	header http.Header
	body   []byte
}

// getRunStream starts GET /v1/threads/{thread}/runs/{run}/stream?query and
// reads it to its end in the background.
func getRunStream(t *testing.T, env *stacktest.Env, thread, run, query string, hdr ...string) <-chan runStream {
	t.Helper()
	req, _ := http.NewRequest("GET", env.URL+"/v1/threads/"+thread+"/runs/"+run+"/stream?"+query, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	out := make(chan runStream, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- runStream{body: []byte("error: " + err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out <- runStream{resp.StatusCode, resp.Header, b}
	}()
	return out
}

// asSSE is a read stream as the response an SDK's stream decoder reads.
func (s runStream) asSSE() *http.Response {
	return &http.Response{StatusCode: s.status, Header: s.header, Body: io.NopCloser(bytes.NewReader(s.body))}
}

// openaiText decodes a stream with openai-go's decoder as
// chat.completion.chunk events: the answer and the finish reason.
func openaiText(t *testing.T, s runStream) (text, finish string) {
	t.Helper()
	st := ssestream.NewStream[openai.ChatCompletionChunk](ssestream.NewDecoder(s.asSSE()), nil)
	for st.Next() {
		c := st.Current()
		if c.Object != "chat.completion.chunk" || len(c.Choices) != 1 {
			t.Fatalf("not a completion chunk: %s", c.RawJSON())
		}
		text += c.Choices[0].Delta.Content
		if c.Choices[0].FinishReason != "" {
			finish = c.Choices[0].FinishReason
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("openai-go reading the stream: %v\n%s", err, s.body)
	}
	return text, finish
}

// anthropicMessage decodes a stream with anthropic-sdk-go's decoder and
// accumulator: the event types in order and the message they build.
func anthropicMessage(t *testing.T, s runStream) ([]string, anthropic.Message) {
	t.Helper()
	st := assestream.NewStream[anthropic.MessageStreamEventUnion](assestream.NewDecoder(s.asSSE()), nil)
	var types []string
	var msg anthropic.Message
	for st.Next() {
		e := st.Current()
		types = append(types, e.Type)
		if err := msg.Accumulate(e); err != nil {
			t.Fatalf("accumulate %s: %v", e.Type, err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("anthropic-sdk-go reading the stream: %v\n%s", err, s.body)
	}
	return types, msg
}

// aguiEvents reads an AG-UI stream's events: their types and the text.
func aguiEvents(t *testing.T, s runStream) (types []string, text string) {
	t.Helper()
	for _, frame := range strings.Split(string(s.body), "\n\n") {
		data, ok := strings.CutPrefix(frame, "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("AG-UI frame %q: %v", data, err)
		}
		typ, _ := e["type"].(string)
		types = append(types, typ)
		if typ == "TEXT_MESSAGE_CONTENT" {
			text += e["delta"].(string)
		}
	}
	return types, text
}

// startDropped starts a streamed Chat Completions turn on session whose
// model call is held, waits for its first chunk and hangs up, as a page
// that reloads does; it returns the running turn's run id.
func startDropped(t *testing.T, env *stacktest.Env, tenant, session string, hdr ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", env.URL+"/v1/chat/completions", strings.NewReader(
		`{"model":"assistant","stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-stackbone-session", session)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("the turn: %d", resp.StatusCode)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatalf("the turn sent nothing: %v", err)
	}
	cancel() // the page reloads
	resp.Body.Close()
	testwait.Until(t, "the dropped turn to be recorded as abandoned", func() bool {
		th, err := env.Store.GetThread(context.Background(), tenant, session)
		return err == nil && th.Abandoned && th.Status == store.Running
	})
	return env.Thread(t, tenant, session).RunID
}

// runStreamDrivers are the stores the run stream tests run on.
var runStreamDrivers = map[string]func(t *testing.T) store.Store{
	"sqlite":   func(*testing.T) store.Store { return nil },
	"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "run_stream") },
}

// TestRunStreamReattach: a Chat Completions UI streaming a turn whose model
// call is held reloads (its request dropped); the reloaded page reattaches
// through GET /v1/threads/{id}/runs/{run}/stream in the format of its wire
// and, once the model answers, gets the whole answer in that wire's own
// streaming format, read by the wire's official SDK decoder: OpenAI
// chat.completion.chunk frames ending with [DONE], Anthropic message_start
// … message_stop, AG-UI RUN_STARTED … RUN_FINISHED with the state and
// messages snapshots. The reattached page is the turn's client again (the
// turn is no longer abandoned) and the model is asked once. SQLite and
// PostgreSQL.
func TestRunStreamReattach(t *testing.T) {
	t.Parallel()
	for driver, open := range runStreamDrivers {
		for _, format := range []string{"openai", "anthropic", "agui"} {
			t.Run(driver+"/"+format, func(t *testing.T) {
				t.Parallel()
				env := stacktest.New(t, stacktest.Options{Store: open(t), Mode: config.Start, Keys: cancelKeys})
				release := env.Upstream.HoldOnce(script.When{LastUser: "long story"})
				t.Cleanup(release)
				runID := startDropped(t, env, "acme", "reload-"+format, acmeCaller...)

				got := getRunStream(t, env, "reload-"+format, runID, "format="+format, acmeCaller...)
				testwait.Until(t, "the reloaded page to attach", func() bool {
					th, err := env.Store.GetThread(context.Background(), "acme", "reload-"+format)
					return err == nil && !th.Abandoned
				})
				release()
				s := testwait.Recv(t, got, "the reattached stream")
				if s.status != 200 || !strings.HasPrefix(s.header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("reattach: %d %s\n%s", s.status, s.header.Get("Content-Type"), s.body)
				}
				switch format {
				case "openai":
					text, finish := openaiText(t, s)
					if text != reloadAnswer || finish != "stop" || !bytes.HasSuffix(s.body, []byte("data: [DONE]\n\n")) {
						t.Fatalf("got %q (finish %q); want the whole answer, then [DONE]:\n%s", text, finish, s.body)
					}
				case "anthropic":
					types, msg := anthropicMessage(t, s)
					if len(types) < 2 || types[0] != "message_start" || types[len(types)-1] != "message_stop" ||
						len(msg.Content) != 1 || msg.Content[0].Text != reloadAnswer || msg.Model != "assistant" ||
						msg.StopReason != anthropic.StopReasonEndTurn {
						t.Fatalf("got %v, message %+v; want message_start … message_stop with the whole answer", types, msg)
					}
				case "agui":
					types, text := aguiEvents(t, s)
					if len(types) == 0 || types[0] != "RUN_STARTED" || types[len(types)-1] != "RUN_FINISHED" || text != reloadAnswer ||
						!slices.Contains(types, "STATE_SNAPSHOT") || !slices.Contains(types, "MESSAGES_SNAPSHOT") {
						t.Fatalf("got %v (text %q); want the run with its snapshots to its end", types, text)
					}
				}
				if n := env.Upstream.Count(); n != 1 {
					t.Fatalf("%d model calls; want 1", n)
				}
			})
		}
	}
}

// TestRunStreamFinished: the stream of a finished run is its stored turn,
// from its first event to its end, in every format, also an earlier turn's
// once the thread went on; any role that reads threads may read it
// (an approver key). Another tenant, an unknown run or thread are 404
// not_found in OpenAI's envelope; an unknown format is 400. SQLite and
// PostgreSQL.
func TestRunStreamFinished(t *testing.T) {
	t.Parallel()
	for driver, open := range runStreamDrivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			env := stacktest.New(t, stacktest.Options{Store: open(t), Mode: config.Start, Keys: cancelKeys})
			session := []string{acmeAdmin[0], acmeAdmin[1], "x-stackbone-session", "done"}
			for _, q := range []string{"first question", "second question"} {
				r := call(t, "POST", env.URL+"/v1/chat/completions",
					`{"model":"assistant","messages":[{"role":"user","content":"`+q+`"}]}`, session...)
				if r.status != 200 {
					t.Fatalf("turn %q: %d %s", q, r.status, r.body)
				}
			}
			runs, err := env.Store.ListRuns(t.Context(), "acme", "done")
			if err != nil || len(runs) != 2 {
				t.Fatalf("runs: %v %v", runs, err)
			}
			first, second := runs[0].ID, runs[1].ID
			calls := env.Upstream.Count()

			for run, want := range map[string]string{first: "echo: first question", second: "echo: second question"} {
				s := testwait.Recv(t, getRunStream(t, env, "done", run, "format=openai", acmeApprover...), "the finished run's stream")
				if text, finish := openaiText(t, s); s.status != 200 || text != want || finish != "stop" ||
					!bytes.HasSuffix(s.body, []byte("data: [DONE]\n\n")) {
					t.Fatalf("run %s: %d %q; want %q to [DONE]:\n%s", run, s.status, text, want, s.body)
				}
			}
			s := testwait.Recv(t, getRunStream(t, env, "done", first, "format=anthropic", acmeAdmin...), "anthropic")
			if types, msg := anthropicMessage(t, s); types[0] != "message_start" || types[len(types)-1] != "message_stop" ||
				len(msg.Content) != 1 || msg.Content[0].Text != "echo: first question" {
				t.Fatalf("anthropic: %v %+v", types, msg)
			}
			// No format: AG-UI events.
			s = testwait.Recv(t, getRunStream(t, env, "done", second, "", acmeAdmin...), "agui")
			if types, text := aguiEvents(t, s); types[0] != "RUN_STARTED" || types[len(types)-1] != "RUN_FINISHED" ||
				text != "echo: second question" || !slices.Contains(types, "MESSAGES_SNAPSHOT") {
				t.Fatalf("default format: %v %q", types, text)
			}
			s = testwait.Recv(t, getRunStream(t, env, "done", second, "format=responses", acmeAdmin...), "responses")
			if !strings.Contains(string(s.body), "event: response.created\n") || !strings.Contains(string(s.body), "event: response.completed\n") ||
				!strings.Contains(string(s.body), `"delta":"echo: second question"`) {
				t.Fatalf("responses:\n%s", s.body)
			}
			if n := env.Upstream.Count(); n != calls {
				t.Fatalf("streaming stored runs asked the model %d more times", n-calls)
			}

			for _, c := range []struct {
				name, thread, run, query string
				hdr                      []string
				status                   int
				code                     string
			}{
				{"another tenant", "done", first, "format=openai", betaAdmin, 404, "not_found"},
				{"unknown run", "done", "run_nope", "format=openai", acmeAdmin, 404, "not_found"},
				{"unknown thread", "nope", first, "format=openai", acmeAdmin, 404, "not_found"},
				{"unknown format", "done", first, "format=xml", acmeAdmin, 400, ""},
			} {
				s := testwait.Recv(t, getRunStream(t, env, c.thread, c.run, c.query, c.hdr...), c.name)
				if s.status != c.status || (c.code != "" && errorOf(t, s.body)["code"] != c.code) {
					t.Errorf("%s: %d %s; want %d %s", c.name, s.status, s.body, c.status, c.code)
				}
			}
		})
	}
}
