package notify_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/stackbone/stackbone/internal/clock"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/notify"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/store/sqlite"
	"github.com/stackbone/stackbone/internal/testwait"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// t0 is a minute before the real clock: notices are due at once, and within
// their retry schedule.
var t0 = time.Now().UTC().Add(-time.Minute).Truncate(time.Second)

// receiver is a webhook endpoint that verifies every request with the
// Standard Webhooks library and answers with the status fail returns.
type receiver struct {
	t   *testing.T
	wh  *standardwebhooks.Webhook
	now bool // verify the timestamp against the real clock
	mu  sync.Mutex
	got []received
	// status answers attempt n (0-based) of a message id.
	status func(id string, n int) int
	hold   chan struct{}
}

type received struct {
	ID, Timestamp string
	Body          []byte
}

func newReceiver(t *testing.T, status func(id string, n int) int) (*receiver, *httptest.Server) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, wh: wh, status: status}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.hold != nil {
		<-r.hold
	}
	body, _ := io.ReadAll(req.Body)
	verify := r.wh.VerifyIgnoringTimestamp
	if r.now {
		verify = r.wh.Verify
	}
	if err := verify(body, req.Header); err != nil {
		r.t.Errorf("signature of %s does not verify: %v", req.Header.Get("webhook-id"), err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	id := req.Header.Get("webhook-id")
	n := 0
	for _, g := range r.got {
		if g.ID == id {
			n++
		}
	}
	r.got = append(r.got, received{ID: id, Timestamp: req.Header.Get("webhook-timestamp"), Body: body})
	r.mu.Unlock()
	w.WriteHeader(r.status(id, n))
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// pendingDecision stores a thread waiting on one decision, which writes a
// decision.pending notice.
func pendingDecision(t *testing.T, s store.Store, thread string) {
	t.Helper()
	ctx := t.Context()
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "acme", ThreadID: thread, Agent: "refunds", RunID: "run_" + thread,
		Owner: "o", Now: t0, LeaseUntil: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "acme", ThreadID: thread, RunID: "run_" + thread,
		Interrupts: []store.Interrupt{{ID: "int_" + thread, ToolCallID: "call_1", Tool: "refund", Description: "Refund an order",
			Args: json.RawMessage(`{"orderId":"A1","amount":40}`), AllowedDecisions: []string{"approve", "reject"}, CreatedAt: t0}}}); err != nil {
		t.Fatal(err)
	}
}

func openStore(t *testing.T, endpoints ...string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), t.TempDir()+"/s.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.SetWebhooks(store.WebhookRefs(endpoints))
	return s
}

func start(t *testing.T, cfg notify.Config) *notify.Dispatcher {
	t.Helper()
	if cfg.Secret == "" {
		cfg.Secret = secret
	}
	if cfg.Poll == 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	cfg.PublicURL = "https://stackbone.example"
	d, err := notify.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := t.Context(), func() {}
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); testwait.Recv(t, done, "the dispatcher to stop") })
	return d
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, what, cond)
}

// TestDeliverySignedAndShaped: a notice arrives signed so that the
// Standard Webhooks library verifies it, as {type, timestamp, data} with
// what a receiver needs to act, and is listed as delivered.
func TestDeliverySignedAndShaped(t *testing.T) {
	rcv, srv := newReceiver(t, func(string, int) int { return http.StatusNoContent })
	rcv.now = true
	s := openStore(t, srv.URL+"/hook")
	start(t, notify.Config{Store: s, Endpoints: []string{srv.URL + "/hook"}})
	pendingDecision(t, s, "t1")
	waitFor(t, "the delivery", func() bool { return len(rcv.all()) == 1 })
	got := rcv.all()[0]
	var body struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(got.Body, &body); err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	_ = json.Unmarshal(body.Data, &data)
	if body.Type != "decision.pending" || !body.Timestamp.Equal(t0) || data["decisionId"] != "int_t1" || data["tool"] != "refund" ||
		data["description"] != "Refund an order" || data["threadId"] != "t1" || data["runId"] != "run_t1" || data["agent"] != "refunds" ||
		data["tenant"] != "acme" || data["studioUrl"] != "https://stackbone.example/studio/#/threads/t1" {
		t.Fatalf("body: %s", got.Body)
	}
	if args, _ := json.Marshal(data["args"]); string(args) != `{"amount":40,"orderId":"A1"}` {
		t.Fatalf("args: %s", args)
	}
	waitFor(t, "the delivery recorded", func() bool {
		ds, _ := s.ListDeliveries(t.Context(), "acme", 10)
		return len(ds) == 1 && ds[0].Status == store.DeliveryDelivered && ds[0].Attempts == 1 && ds[0].LastStatus == 204
	})
}

// TestRetriesKeepTheID: a failing endpoint gets the notice again on the
// retry schedule, with the same webhook-id and body, until it answers 2xx;
// one that never does is marked failed after the schedule (about 27 h).
func TestRetriesKeepTheID(t *testing.T) {
	clk := clock.NewFake(t0)
	rcv, srv := newReceiver(t, func(id string, n int) int {
		if id != "" && n < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	never, nsrv := newReceiver(t, func(string, int) int { return http.StatusInternalServerError })
	s := openStore(t, srv.URL, nsrv.URL)
	const poll = time.Millisecond
	d := start(t, notify.Config{Store: s, Endpoints: []string{srv.URL, nsrv.URL}, Clock: clk, Poll: poll})
	// look lets d time pass and returns once the dispatcher looked for due
	// deliveries at the new time (its poll fired and was armed again), with
	// the attempts that look started under way.
	look := func(by time.Duration) {
		t.Helper()
		clk.Advance(by)
		if err := clk.AwaitTimers(testwait.Context(t), 1); err != nil {
			t.Fatalf("the dispatcher's poll: %v", err)
		}
	}
	if err := clk.AwaitTimers(testwait.Context(t), 1); err != nil {
		t.Fatalf("the dispatcher's poll: %v", err)
	}
	pendingDecision(t, s, "t1")
	look(poll)
	// recorded: each endpoint's n-th attempt is recorded (its next attempt
	// is scheduled from the clock as it was then, so the clock moves on only
	// after that).
	recorded := func(n int) bool {
		ds, _ := s.ListDeliveries(t.Context(), "acme", 10)
		got := map[string]int{}
		for _, d := range ds {
			got[d.Endpoint] = d.Attempts
		}
		return got[store.WebhookRef(nsrv.URL)] == n && got[store.WebhookRef(srv.URL)] == min(n, 4)
	}
	waitFor(t, "the first attempts", func() bool {
		return len(rcv.all()) == 1 && len(never.all()) == 1 && recorded(1) && d.InFlight() == 0
	})
	var total time.Duration
	for i, wait := range notify.Schedule {
		if i > 0 {
			waitFor(t, "the retry recorded", func() bool { return recorded(i+1) && d.InFlight() == 0 })
		}
		total += wait
		look(wait - poll) // nothing due yet
		if n := len(never.all()); n != i+1 || d.InFlight() != 0 {
			t.Fatalf("attempt %d came %v early", i+2, poll)
		}
		look(poll)
		waitFor(t, "the retry", func() bool { return len(never.all()) == i+2 })
	}
	if total < 24*time.Hour {
		t.Fatalf("the schedule retries for %v, less than 24 h", total)
	}
	gotA, gotB := rcv.all(), never.all()
	if len(gotA) != 4 || len(gotB) != len(notify.Schedule)+1 {
		t.Fatalf("attempts: %d and %d", len(gotA), len(gotB))
	}
	for _, g := range append(gotA, gotB...) {
		if g.ID != gotA[0].ID || string(g.Body) != string(gotA[0].Body) {
			t.Fatalf("a retry changed the message: %s %s", g.ID, g.Body)
		}
	}
	waitFor(t, "the outcomes recorded", func() bool {
		ds, _ := s.ListDeliveries(t.Context(), "acme", 10)
		st := map[string]store.Delivery{}
		for _, d := range ds {
			st[d.Endpoint] = d
		}
		a, b := st[store.WebhookRef(srv.URL)], st[store.WebhookRef(nsrv.URL)]
		return a.Status == store.DeliveryDelivered && a.Attempts == 4 &&
			b.Status == store.DeliveryFailed && b.Attempts == len(notify.Schedule)+1 && d.InFlight() == 0
	})
	look(48 * time.Hour)
	if len(never.all()) != len(notify.Schedule)+1 || d.InFlight() != 0 {
		t.Fatal("a failed delivery was attempted again")
	}
}

// TestSlowEndpointHoldsOnlyItself: an endpoint that does not answer
// holds up neither the store's writers nor another endpoint's deliveries.
func TestSlowEndpointHoldsOnlyItself(t *testing.T) {
	slow, ssrv := newReceiver(t, func(string, int) int { return http.StatusOK })
	slow.hold = make(chan struct{})
	t.Cleanup(func() { close(slow.hold) })
	fast, fsrv := newReceiver(t, func(string, int) int { return http.StatusOK })
	s := openStore(t, ssrv.URL, fsrv.URL)
	start(t, notify.Config{Store: s, Endpoints: []string{ssrv.URL, fsrv.URL}})
	for _, th := range []string{"t1", "t2", "t3", "t4", "t5", "t6"} {
		pendingDecision(t, s, th)
	}
	waitFor(t, "every notice at the fast endpoint", func() bool { return len(fast.all()) == 6 })
}

// TestReplicasDeliverOnce: two dispatchers on one store (two replicas)
// deliver each notice once.
func TestReplicasDeliverOnce(t *testing.T) {
	rcv, srv := newReceiver(t, func(string, int) int { return http.StatusOK })
	s := openStore(t, srv.URL)
	d1 := start(t, notify.Config{Store: s, Endpoints: []string{srv.URL}})
	d2 := start(t, notify.Config{Store: s, Endpoints: []string{srv.URL}})
	for i := range 20 {
		pendingDecision(t, s, "t"+string(rune('a'+i)))
	}
	// Once every delivery is recorded delivered and neither dispatcher has
	// an attempt under way, no further attempt can come.
	waitFor(t, "20 deliveries recorded", func() bool {
		ds, _ := s.ListDeliveries(t.Context(), "acme", 100)
		for _, d := range ds {
			if d.Status != store.DeliveryDelivered {
				return false
			}
		}
		return len(ds) == 20 && d1.InFlight() == 0 && d2.InFlight() == 0
	})
	seen := map[string]bool{}
	for _, g := range rcv.all() {
		if seen[g.ID] {
			t.Fatalf("notice %s delivered twice", g.ID)
		}
		seen[g.ID] = true
	}
	if len(seen) != 20 {
		t.Fatalf("%d distinct notices, want 20", len(seen))
	}
}

// TestSlackFormat: the slack format posts {"text": …} with the Studio link.
func TestSlackFormat(t *testing.T) {
	b, err := notify.Body(config.WebhookSlack, "https://sb.example", store.Notice{ID: "msg_1", Type: store.NoticeDecisionPending,
		At: t0, Data: json.RawMessage(`{"tenant":"acme","agent":"refunds","threadId":"t1","tool":"refund","description":"Refund A1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"text":"Approval needed: refund (agent refunds, thread t1): Refund A1 \u003chttps://sb.example/studio/#/threads/t1|Open in Studio\u003e"}`
	if string(b) != want {
		t.Fatalf("slack body:\n got %s\nwant %s", b, want)
	}
}
