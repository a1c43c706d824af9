package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// turn is one user turn as the client saw it.
type turn struct {
	thread, text string
	// acked: the client got 200 with the turn's answer.
	acked bool
	// attempts is how many requests the client sent for it.
	attempts int
	// last is the last failure (status or error) when not acked, and
	// why its short form ("409 run_in_progress", "connection error").
	last, why string
	// next: after a connection error or a 5xx the client does not retry
	// the turn but goes on with the thread's next message (abandoned).
	next, abandoned bool
}

// retryCause names why a client retried.
type retryCause string

const (
	causeConn     retryCause = "connection error"
	causeConflict retryCause = "409"
	causeLimited  retryCause = "429"
	causeServer   retryCause = "5xx"
	causeTimeout  retryCause = "408"
)

// driver sends the turns.
type driver struct {
	o    options
	c    *cluster
	http *http.Client

	// serving maps a thread to the server its current request went to
	// (for aimed kills).
	serving sync.Map

	mu      sync.Mutex
	turns   []*turn
	threads []string
	retries map[retryCause]int
	// approvals counts decisions the clients made.
	approvals int
}

// drive runs o.concurrency clients until o.turns turns were sent or ctx
// ends. Each client sends o.perThread turns on a thread, then takes a new
// one.
func (d *driver) drive(ctx context.Context, seed uint64) {
	d.retries = map[retryCause]int{}
	var next atomic.Int64
	var wg sync.WaitGroup
	run := fmt.Sprintf("%x", seed&0xffffff)
	for w := range d.o.concurrency {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				thread := fmt.Sprintf("chaos-%s-w%d-%d", run, w, n)
				d.mu.Lock()
				d.threads = append(d.threads, thread)
				d.mu.Unlock()
				for k := range d.o.perThread {
					if next.Add(1) > int64(d.o.turns) || ctx.Err() != nil {
						return
					}
					verb := "refund"
					switch x := rng.Float64(); {
					case x < d.o.approvalShare:
						verb = "payout"
					case x < d.o.approvalShare+d.o.slowShare:
						verb = "charge"
					case x < (1+d.o.approvalShare+d.o.slowShare)/2:
						verb = "reserve"
					}
					t := &turn{thread: thread, text: fmt.Sprintf("%s %s-t%d", verb, thread, k),
						next: rng.Float64() < d.o.nextShare}
					d.mu.Lock()
					d.turns = append(d.turns, t)
					d.mu.Unlock()
					d.send(ctx, rng, t)
				}
			}
		})
	}
	wg.Wait()
}

// send posts one turn the way the official SDKs do: retries on connection
// errors, 408, 409, 429 and 5xx with exponential back-off and jitter,
// x-should-retry deciding when present, retry-after(-ms) honoured.
func (d *driver) send(ctx context.Context, rng *rand.Rand, t *turn) {
	body, _ := json.Marshal(map[string]any{"model": "chaos", "messages": []map[string]string{{"role": "user", "content": t.text}}})
	want := "Done: " + t.text
	for attempt := 0; ; attempt++ {
		node := rng.IntN(len(d.c.nodes))
		d.serving.Store(t.thread, node)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.c.url(node)+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("x-stackbone-session", t.thread)
		if d.o.idempotencyKey {
			req.Header.Set("Idempotency-Key", "key-"+t.text)
		}
		t.attempts++
		resp, err := d.http.Do(req)
		var cause retryCause
		var wait time.Duration
		retry := false
		if err != nil {
			if ctx.Err() != nil {
				t.last, t.why = "stopped", "stopped at -duration"
				return
			}
			cause, retry, t.last, t.why = causeConn, true, err.Error(), string(causeConn)
		} else {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			var out struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			switch {
			case rerr != nil:
				cause, retry, t.last, t.why = causeConn, true, rerr.Error(), string(causeConn)
			case resp.StatusCode == http.StatusOK && t.approval():
				// Paused for the payout's approval: a human approves it.
				d.approve(ctx, rng, t)
				return
			case resp.StatusCode == http.StatusOK:
				if json.Unmarshal(b, &out) == nil && len(out.Choices) > 0 && out.Choices[0].Message.Content == want {
					t.acked = true
					return
				}
				t.last, t.why = "200 without the turn's answer: "+trim(b), "200 without the answer"
				return
			default:
				var e struct {
					Error struct {
						Code string `json:"code"`
					} `json:"error"`
				}
				_ = json.Unmarshal(b, &e)
				t.last, t.why = fmt.Sprintf("%d %s", resp.StatusCode, trim(b)), strings.TrimSpace(fmt.Sprintf("%d %s", resp.StatusCode, e.Error.Code))
				switch s := resp.StatusCode; {
				case s == 408:
					cause, retry = causeTimeout, true
				case s == 409:
					cause, retry = causeConflict, true
				case s == 429:
					cause, retry = causeLimited, true
				case s >= 500:
					cause, retry = causeServer, true
				}
			}
			switch resp.Header.Get("x-should-retry") {
			case "true":
				retry = true
				if cause == "" {
					cause = retryCause(strconv.Itoa(resp.StatusCode))
				}
			case "false":
				retry = false
			}
			wait = retryAfter(resp.Header)
		}
		if !retry || attempt >= d.o.maxRetries {
			return
		}
		if t.next && (cause == causeConn || cause == causeServer) {
			// The user gives up waiting and types the next message: the
			// race of a new turn with the recovery of this one.
			t.abandoned, t.why = true, "abandoned for the next message after "+string(cause)
			return
		}
		d.mu.Lock()
		d.retries[cause]++
		d.mu.Unlock()
		if wait <= 0 || wait > time.Minute {
			// The SDKs: 0.5 s × 2^n, at most 8 s, minus up to 25 % jitter.
			wait = time.Duration(math.Min(0.5*math.Pow(2, float64(attempt)), 8) * (1 - 0.25*rng.Float64()) * float64(time.Second))
		}
		select {
		case <-ctx.Done():
			t.last, t.why = "stopped", "stopped at -duration"
			return
		case <-time.After(wait):
		}
	}
}

// retryAfter reads retry-after-ms, then retry-after (seconds or an HTTP
// date), as the SDKs do; 0 when absent.
func retryAfter(h http.Header) time.Duration {
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(s * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		return time.Until(at)
	}
	return 0
}

func trim(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// threadView is GET /v1/threads/{id}.
type threadView struct {
	Status   string `json:"status"`
	Messages []struct {
		Role       string            `json:"role"`
		Content    string            `json:"content"`
		ToolCalls  []json.RawMessage `json:"toolCalls"`
		ToolCallID string            `json:"toolCallId"`
	} `json:"messages"`
	Pending []struct {
		ID         string `json:"id"`
		Tool       string `json:"tool"`
		ToolCallID string `json:"toolCallId"`
		Reason     string `json:"reason"`
	} `json:"pending"`
}

// approval reports whether the turn's tool needs a human's approval.
func (t *turn) approval() bool { return strings.HasPrefix(t.text, "payout ") }

// approveWithin bounds how long a client waits for an approved turn's
// answer.
const approveWithin = 30 * time.Second

// approve plays the human and the client of a paused payout turn: it
// approves the turn's pending approval (through any server, as often as it
// finds one pending) and waits for the turn's answer. A decision in doubt
// (reason in_doubt) is left for the report.
func (d *driver) approve(ctx context.Context, rng *rand.Rand, t *turn) {
	deadline := time.Now().Add(approveWithin)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		node := rng.IntN(len(d.c.nodes))
		d.serving.Store(t.thread, node)
		th, err := d.thread(ctx, node, t.thread)
		if err == nil && th != nil {
			if stored(th, t.text) {
				t.acked = true
				return
			}
			for _, p := range th.Pending {
				if p.Reason == "in_doubt" {
					t.why = "in_doubt decision"
					return
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.c.url(node)+"/v1/hitl/"+p.ID+"/approve", nil)
				req.Header.Set("Authorization", "Bearer "+apiKey)
				if resp, err := d.http.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						d.mu.Lock()
						d.approvals++
						d.mu.Unlock()
					}
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.why = "no answer after approval"
}

// thread reads one thread through server node; nil when it does not exist.
func (d *driver) thread(ctx context.Context, node int, id string) (*threadView, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.c.url(node)+"/v1/threads/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := d.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read thread %s: %w", id, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("read thread %s: %d %s", id, resp.StatusCode, trim(b))
	}
	v := &threadView{}
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("thread %s: %w", id, err)
	}
	return v, nil
}

// settle waits, at most limit, until no thread is running or queued, and
// returns every thread as the API shows it then (missing threads, never
// admitted, are absent).
func (d *driver) settle(ctx context.Context, limit time.Duration) (map[string]*threadView, error) {
	deadline := time.Now().Add(limit)
	for {
		views, busy, err := d.fetchAll(ctx)
		if err != nil {
			return nil, err
		}
		if busy == 0 || !time.Now().Before(deadline) {
			return views, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// fetchAll reads every thread through the first server, and counts those
// still running or queued.
func (d *driver) fetchAll(ctx context.Context) (map[string]*threadView, int, error) {
	views := map[string]*threadView{}
	busy := 0
	for _, id := range d.threads {
		v, err := d.thread(ctx, 0, id)
		if err != nil {
			return nil, 0, err
		}
		if v == nil {
			continue
		}
		views[id] = v
		if v.Status == "running" || v.Status == "queued" {
			busy++
		}
	}
	return views, busy, nil
}

// probe sends one more turn ("probe <thread>", answered without a tool) to
// every thread that is not waiting on a decision, as a client coming back
// would, and returns the turns refused even after the client's retries:
// a thread that answers 409 forever is stuck too.
func (d *driver) probe(ctx context.Context, threads map[string]*threadView, seed uint64) []*turn {
	ids := make(chan string)
	var mu sync.Mutex
	var refused []*turn
	var wg sync.WaitGroup
	for w := range d.o.concurrency {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for id := range ids {
				t := &turn{thread: id, text: "probe " + id}
				d.send(ctx, rng, t)
				if !t.acked {
					mu.Lock()
					refused = append(refused, t)
					mu.Unlock()
				}
			}
		})
	}
	for id, th := range threads {
		if th.Status != "waiting" {
			ids <- id
		}
	}
	close(ids)
	wg.Wait()
	return refused
}
