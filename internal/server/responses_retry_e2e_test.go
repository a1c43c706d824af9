package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// billingScript drives the billing agent: "charge …" → the charge tool,
// then "Charged: <its result>"; anything else → "echo: <text>".
const billingScript = `[
 {"when": {"lastTool": "charge"}, "reply": {"text": "Charged: {{lastTool}}"}},
 {"when": {"lastUser": "charge"}, "reply": {"toolCalls": [{"name": "charge", "arguments": {"amount": 5}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// billing is a stack whose agent "billing" has one server tool, charge (a
// side effect that must happen once), counted in env.Calls. A gated
// billing's charges each wait for a token on gate once started, until
// freeAll.
type billing struct {
	*stacktest.Env
	started chan struct{} // one value per charge begun
	gate    chan struct{} // nil: charges do not wait
	free    chan struct{} // closed by freeAll: no charge waits any more
	once    sync.Once
}

// freeAll lets every charge, waiting or to come, go on.
func (b *billing) freeAll() { b.once.Do(func() { close(b.free) }) }

// responseStores are the drivers the Responses retry tests run on.
var responseStores = map[string]func(t *testing.T) store.Store{
	"sqlite":   func(*testing.T) store.Store { return nil },
	"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "resp_retry") },
}

func newBilling(t *testing.T, st store.Store, gated bool) *billing {
	t.Helper()
	b := &billing{started: make(chan struct{}, 64), free: make(chan struct{})}
	if gated {
		b.gate = make(chan struct{})
	}
	b.Env = stacktest.New(t, stacktest.Options{Store: st, Script: billingScript, Agents: func(env *stacktest.Env) []*agent.Spec {
		charge := &tool.Tool{
			Name: "charge", Description: "Charge the customer's card",
			Parameters: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`),
			Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				env.Calls.Add("charge", c.Args)
				b.started <- struct{}{}
				if b.gate != nil {
					select {
					case <-b.gate:
					case <-b.free:
					case <-ctx.Done():
						return tool.Result{}, ctx.Err()
					}
				}
				return tool.Result{Content: `{"charged":5}`}, nil
			},
		}
		return []*agent.Spec{{Name: "billing", Model: "openai/test-model", Instructions: "You bill.", Tools: []*tool.Tool{charge}}}
	}})
	t.Cleanup(b.freeAll) // before the stack's own cleanup, which waits for the runs
	return b
}

// waitStarted waits for the next charge to begin.
func (b *billing) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-b.started:
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for a charge to begin")
	}
}

// attaches counts the retries the engine attached to a first attempt.
func (b *billing) attaches() int {
	return strings.Count(b.Logs.String(), "retried turn attaches to its first attempt")
}

// tally is what the stack did for tenant dev: its threads, the user
// messages stored in them, charges made and model calls.
type tally struct{ threads, users, charges, models int }

func (b *billing) tally(t *testing.T) tally {
	t.Helper()
	ths, err := b.Store.ListThreads(context.Background(), "dev", store.ThreadFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	n := tally{threads: len(ths), charges: b.Calls.Get("charge"), models: b.Upstream.Count()}
	for _, th := range ths {
		msgs, err := b.Store.Messages(context.Background(), "dev", th.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Role == message.User {
				n.users++
			}
		}
	}
	return n
}

// waitIdle waits until every thread of tenant dev has ended its turn.
func (b *billing) waitIdle(t *testing.T) {
	t.Helper()
	stacktest.WaitFor(t, "every turn to end", func() bool {
		ths, err := b.Store.ListThreads(context.Background(), "dev", store.ThreadFilter{Limit: 100})
		if err != nil {
			return false
		}
		for _, th := range ths {
			if th.Status == store.Running || th.Status == store.Queued {
				return false
			}
		}
		return true
	})
}

// answer is what a POST /v1/responses answered, JSON or streamed.
type answer struct {
	status   int
	id       string // the response's id (a stream's: every event's)
	state    string // the response's status
	text     string
	code     string // an error's code
	raw      string
	streamed bool
}

// postResponse sends a Responses request (safe to call from any
// goroutine); key, when set, is its Idempotency-Key.
func postResponse(url, body, key string) (answer, error) {
	req, err := http.NewRequest("POST", url+"/v1/responses", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: res.StatusCode, raw: string(raw)}
	type resp struct {
		ID     string
		Status string
		Output []struct{ Content []struct{ Text string } }
	}
	read := func(r resp) {
		a.state, a.text = r.Status, ""
		for _, it := range r.Output {
			for _, c := range it.Content {
				a.text += c.Text
			}
		}
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		var r struct {
			resp
			Error struct{ Code string }
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return a, fmt.Errorf("answer %d is not JSON: %s", res.StatusCode, raw)
		}
		a.id, a.code = r.ID, r.Error.Code
		read(r.resp)
		return a, nil
	}
	a.streamed = true
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string
			Response *resp
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return a, fmt.Errorf("stream event %s: %v", data, err)
		}
		if ev.Response == nil {
			continue
		}
		if a.id != "" && ev.Response.ID != a.id {
			return a, fmt.Errorf("the stream names two responses, %s and %s", a.id, ev.Response.ID)
		}
		a.id = ev.Response.ID
		read(*ev.Response)
	}
	return a, sc.Err()
}

// mustPost is postResponse on the test's goroutine.
func mustPost(t *testing.T, url, body, key string) answer {
	t.Helper()
	a, err := postResponse(url, body, key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// later runs postResponse in the background; wait returns its answer.
func later(url, body, key string) (wait func(t *testing.T) answer) {
	var (
		a    answer
		err  error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		a, err = postResponse(url, body, key)
	}()
	return func(t *testing.T) answer {
		t.Helper()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("timed out waiting for an answer")
		}
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
}

// chargeBody is a request that names no conversation and charges once;
// mode adds "stream" or "background".
func chargeBody(text, mode string) string {
	extra := ""
	switch mode {
	case "stream":
		extra = `,"stream":true`
	case "background":
		extra = `,"background":true`
	}
	return fmt.Sprintf(`{"model":"billing","input":%q%s}`, text, extra)
}

// TestResponsesIdempotencyKeyNewConversation: a request that names no
// conversation sent twice with one Idempotency-Key (a retry after a lost
// answer), JSON, streamed and in the background, on SQLite and PostgreSQL:
// the retry gets the first attempt's response (its id, its text; a
// background retry the response as it stands), the tool ran once, the user
// message is stored once and the model was asked twice (the tool step and
// the answer), in one conversation. The key with another request is a 400
// that runs nothing; a new key is a new response.
func TestResponsesIdempotencyKeyNewConversation(t *testing.T) {
	t.Parallel()
	for driver, open := range responseStores {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := newBilling(t, open(t), false)
			want := tally{}
			for _, mode := range []string{"json", "stream", "background"} {
				key := "charge-" + mode
				body := chargeBody("charge my card ("+mode+")", mode)
				first := mustPost(t, b.URL, body, key)
				if first.status != 200 || first.id == "" {
					t.Fatalf("%s: first attempt %d %s", mode, first.status, first.raw)
				}
				b.waitIdle(t)
				again := mustPost(t, b.URL, body, key)
				if again.status != 200 || again.id != first.id {
					t.Fatalf("%s: the retry got response %q, the first attempt %q: %d %s", mode, again.id, first.id, again.status, again.raw)
				}
				if again.state != "completed" || again.text != `Charged: {"charged":5}` || again.streamed != (mode == "stream") {
					t.Fatalf("%s: the retry's answer: %s", mode, again.raw)
				}
				want = tally{threads: want.threads + 1, users: want.users + 1, charges: want.charges + 1, models: want.models + 2}
				if got := b.tally(t); got != want {
					t.Fatalf("%s: %+v, want %+v", mode, got, want)
				}

				other := mustPost(t, b.URL, chargeBody("charge my card twice ("+mode+")", mode), key)
				if other.status != 400 || other.code != "idempotency_key_reused" {
					t.Fatalf("%s: the key with another request: %d %s", mode, other.status, other.raw)
				}
				if got := b.tally(t); got != want {
					t.Fatalf("%s: a refused request did something: %+v, want %+v", mode, got, want)
				}
			}
			fresh := mustPost(t, b.URL, chargeBody("charge my card (json)", "json"), "charge-again")
			b.waitIdle(t)
			want = tally{threads: want.threads + 1, users: want.users + 1, charges: want.charges + 1, models: want.models + 2}
			if got := b.tally(t); fresh.status != 200 || got != want {
				t.Fatalf("the same request with a new key: %d %s, %+v, want %+v", fresh.status, fresh.raw, got, want)
			}
		})
	}
}

// TestResponsesRetryWithoutKeyAttachesWhileRunning: without an
// Idempotency-Key, the same request sent again while the first attempt
// still runs its tool (JSON and streamed, on SQLite and PostgreSQL) attaches
// to that attempt: both get one response, the tool runs once, the user
// message is stored once. Once the attempt ended, the same request is a new
// question: a new response in a new conversation, whose tool runs.
func TestResponsesRetryWithoutKeyAttachesWhileRunning(t *testing.T) {
	t.Parallel()
	for driver, open := range responseStores {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := newBilling(t, open(t), true)
			want := tally{}
			for _, mode := range []string{"json", "stream"} {
				body := chargeBody("charge my card ("+mode+")", mode)
				first := later(b.URL, body, "")
				b.waitStarted(t)
				attached := b.attaches()
				second := later(b.URL, body, "")
				stacktest.WaitFor(t, "the retry to attach", func() bool { return b.attaches() > attached })
				b.gate <- struct{}{}
				a1, a2 := first(t), second(t)
				if a1.status != 200 || a2.status != 200 || a1.id == "" || a1.id != a2.id {
					t.Fatalf("%s: two answers of one request: %d %s\n%d %s", mode, a1.status, a1.raw, a2.status, a2.raw)
				}
				if a2.state != "completed" || a2.text != `Charged: {"charged":5}` {
					t.Fatalf("%s: the retry's answer: %s", mode, a2.raw)
				}
				want = tally{threads: want.threads + 1, users: want.users + 1, charges: want.charges + 1, models: want.models + 2}
				if got := b.tally(t); got != want {
					t.Fatalf("%s: %+v, want %+v", mode, got, want)
				}

				// After the attempt ended: a new question.
				third := later(b.URL, body, "")
				b.waitStarted(t)
				b.gate <- struct{}{}
				a3 := third(t)
				if a3.status != 200 || a3.id == a1.id || a3.text != `Charged: {"charged":5}` {
					t.Fatalf("%s: the same request after the first ended: %d %s", mode, a3.status, a3.raw)
				}
				want = tally{threads: want.threads + 1, users: want.users + 1, charges: want.charges + 1, models: want.models + 2}
				if got := b.tally(t); got != want {
					t.Fatalf("%s: after the first ended: %+v, want %+v", mode, got, want)
				}
			}
		})
	}
}

// TestResponsesConcurrentRetriesWithKey: several identical requests with
// one Idempotency-Key at once (a client's retries racing its first
// attempt), on SQLite and PostgreSQL, make one response: one conversation,
// one user message, one charge, every answer the same response.
func TestResponsesConcurrentRetriesWithKey(t *testing.T) {
	t.Parallel()
	const racers = 4
	for driver, open := range responseStores {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := newBilling(t, open(t), true)
			body := chargeBody("charge my card", "json")
			start := make(chan struct{})
			answers := make([]answer, racers)
			errs := make([]error, racers)
			var wg sync.WaitGroup
			for i := range racers {
				wg.Go(func() {
					<-start
					answers[i], errs[i] = postResponse(b.URL, body, "charge-once")
				})
			}
			close(start)
			b.waitStarted(t)
			stacktest.WaitFor(t, "the other requests to attach", func() bool { return b.attaches() == racers-1 })
			b.gate <- struct{}{}
			wg.Wait()
			for i, a := range answers {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if a.status != 200 || a.id != answers[0].id || a.text != `Charged: {"charged":5}` {
					t.Fatalf("answer %d: %d %s (answer 0: %s)", i, a.status, a.raw, answers[0].raw)
				}
			}
			if got, want := b.tally(t), (tally{threads: 1, users: 1, charges: 1, models: 2}); got != want {
				t.Fatalf("%+v, want %+v", got, want)
			}
		})
	}
}

// TestResponsesIdempotencyKeyAfterConversationWentOn: the retry, with its
// Idempotency-Key, of a request whose conversation the client has since
// continued (previous_response_id) gets the first response again, JSON and
// streamed, without adding a turn to the conversation or calling the model.
func TestResponsesIdempotencyKeyAfterConversationWentOn(t *testing.T) {
	t.Parallel()
	b := newBilling(t, nil, false)
	body := chargeBody("charge my card", "json")
	first := mustPost(t, b.URL, body, "charge-1")
	next := mustPost(t, b.URL, fmt.Sprintf(`{"model":"billing","input":"thanks","previous_response_id":%q}`, first.id), "")
	if first.status != 200 || next.status != 200 || next.text != "echo: thanks" {
		t.Fatalf("first %d %s\nnext %d %s", first.status, first.raw, next.status, next.raw)
	}
	before := b.tally(t)
	for _, mode := range []string{"json", "stream"} {
		again := mustPost(t, b.URL, chargeBody("charge my card", mode), "charge-1")
		if again.status != 200 || again.id != first.id || again.state != "completed" || again.text != `Charged: {"charged":5}` {
			t.Fatalf("%s: the retry: %d %s", mode, again.status, again.raw)
		}
	}
	if got := b.tally(t); got != before || before != (tally{threads: 1, users: 2, charges: 1, models: 3}) {
		t.Fatalf("the retries did something: %+v, before %+v", got, before)
	}
	// The conversation still goes on from its latest response.
	r := mustPost(t, b.URL, fmt.Sprintf(`{"model":"billing","input":"bye","previous_response_id":%q}`, next.id), "")
	if r.status != 200 || r.text != "echo: bye" {
		t.Fatalf("the conversation after the retries: %d %s", r.status, r.raw)
	}
}

// TestResponsesIdempotencyKeyFailedOrCancelled: a keyed request that names
// no conversation and failed (the model refused it) runs again on its retry
// with the key, in the same conversation, its input stored once; a
// background one that was cancelled is answered cancelled, the same
// response, and nothing runs again.
func TestResponsesIdempotencyKeyFailedOrCancelled(t *testing.T) {
	t.Parallel()
	b := newBilling(t, nil, true)
	b.Upstream.FailNext(1, 400)
	body := chargeBody("charge my card", "json")
	failed := mustPost(t, b.URL, body, "charge-failed")
	if failed.status != 502 {
		t.Fatalf("first attempt: %d %s", failed.status, failed.raw)
	}
	retry := later(b.URL, body, "charge-failed")
	b.waitStarted(t)
	b.gate <- struct{}{}
	if a := retry(t); a.status != 200 || a.state != "completed" || a.text != `Charged: {"charged":5}` {
		t.Fatalf("the retry of a failed attempt: %d %s", a.status, a.raw)
	}
	if got, want := b.tally(t), (tally{threads: 1, users: 1, charges: 1, models: 3}); got != want {
		t.Fatalf("after the failed attempt's retry: %+v, want %+v", got, want)
	}

	bg := chargeBody("charge my card later", "background")
	first := mustPost(t, b.URL, bg, "charge-cancelled")
	b.waitStarted(t)
	if r := call(t, "POST", b.URL+"/v1/responses/"+first.id+"/cancel", ""); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	b.waitIdle(t)
	before := b.tally(t)
	again := mustPost(t, b.URL, bg, "charge-cancelled")
	if again.status != 200 || again.id != first.id || again.state != "cancelled" {
		t.Fatalf("the retry of a cancelled response: %d %s", again.status, again.raw)
	}
	b.waitIdle(t)
	if got := b.tally(t); got != before {
		t.Fatalf("the retry of a cancelled response ran: %+v, before %+v", got, before)
	}
}

// TestResponsesRetryWithoutKeyAfterAFailureAfterTheTool: a stored request
// with no conversation and no Idempotency-Key (openai-node sends none) whose
// model call after the charge fails with a 400 (a 502 for the client). The
// client sends the same body again, as an SDK or an app retrying a 5xx does,
// within the retry window: it continues the failed attempt's conversation,
// the charge is not made again and the user's message is stored once.
func TestResponsesRetryWithoutKeyAfterAFailureAfterTheTool(t *testing.T) {
	t.Parallel()
	for name, open := range responseStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBilling(t, open(t), false)
			b.Upstream.FailWhen(script.When{LastTool: "charge"}, 1, 400, nil)
			body := chargeBody("charge my card", "json")
			if failed := mustPost(t, b.URL, body, ""); failed.status != 502 {
				t.Fatalf("first attempt: %d %s", failed.status, failed.raw)
			}
			a := mustPost(t, b.URL, body, "")
			if a.status != 200 || a.state != "completed" || a.text != `Charged: {"charged":5}` {
				t.Fatalf("the retry: %d %s", a.status, a.raw)
			}
			if got, want := b.tally(t), (tally{threads: 1, users: 1, charges: 1, models: 3}); got != want {
				t.Fatalf("after the retry: %+v, want %+v", got, want)
			}
		})
	}
}
