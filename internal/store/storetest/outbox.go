package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// The webhook outbox: notices are written with the facts they report, and
// delivered by leasing.

var hooks = []string{"https://a.example/hook", "https://b.example/hook"}

// deliveries lists the tenant's deliveries to hooks[0], oldest first (of
// one instant, by name), as "type decisionId" or "type runId".
func deliveries(t *testing.T, s store.Store, tenant string) []string {
	t.Helper()
	ds, err := s.ListDeliveries(t.Context(), tenant, 100)
	if err != nil {
		t.Fatalf("ListDeliveries %s: %v", tenant, err)
	}
	type item struct {
		at   time.Time
		name string
	}
	var items []item
	for _, d := range ds {
		if d.Endpoint != hooks[0] {
			continue
		}
		var data store.NoticeData
		if err := json.Unmarshal(d.Data, &data); err != nil {
			t.Fatalf("notice %s data: %v: %s", d.ID, err, d.Data)
		}
		ref := data.DecisionID
		if ref == "" {
			ref = data.RunID
		}
		items = append(items, item{d.At, d.Type + " " + ref})
	}
	slices.SortFunc(items, func(a, b item) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	out := []string{}
	for _, it := range items {
		out = append(out, it.name)
	}
	return out
}

// testOutboxOff: a store without webhooks writes no notices.
func testOutboxOff(t *testing.T, s store.Store) {
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("int_1", "call_1", T0))
	decide(t, s, "a", "int_1", true, at(time.Second))
	sameStrings(t, "deliveries without webhooks", deliveries(t, s, "a"), []string{})
}

// testOutboxNotices: every fact writes its notice, once per endpoint, in
// its own transaction; what is not stored is not reported.
func testOutboxNotices(t *testing.T, s store.Store) {
	s.SetWebhooks(hooks)
	ctx := t.Context()
	q := interrupt("int_q", "call_2", T0)
	q.ApprovalsNeeded = 2
	q.Description = "Refund an order"
	waiting(t, s, "a", "t", "refunds", "r1", T0, interrupt("int_1", "call_1", T0), q)
	decide(t, s, "a", "int_1", true, at(time.Second))
	// One approval of two: not decided, no notice.
	approveAs(t, s, "int_q", "a/alice", at(2*time.Second), "")
	if _, err := s.Decide(ctx, "a", "int_q", store.Decision{Approved: false, Via: store.ViaExpiry, At: at(3 * time.Second),
		Message: "The approval request expired."}); err != nil {
		t.Fatal(err)
	}
	// A checkpoint that lost its lease writes nothing, notices included.
	err := s.Checkpoint(ctx, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "stale",
		Interrupts: []store.Interrupt{interrupt("int_lost", "call_3", T0)}})
	wantErr(t, "checkpoint of a stale run", err, store.ErrLeaseLost)
	if _, err := s.Claim(ctx, store.Claim{Tenant: "a", ThreadID: "t", RunID: "r2", Owner: "o", Now: at(4 * time.Second),
		LeaseUntil: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	finish(t, s, "a", "t", "r2", store.Idle, at(5*time.Second))
	begin(t, s, "a", "t", "refunds", "r3", at(6*time.Second), userMsg("m3", "again"))
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r3", Status: store.Failed,
		Error: "upstream down", Now: at(7 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	waiting(t, s, "b", "t", "refunds", "r1", T0, interrupt("int_b", "call_1", T0))

	sameStrings(t, "tenant a's notices", deliveries(t, s, "a"), []string{
		"decision.pending int_1", "decision.pending int_q", "decision.decided int_1", "decision.expired int_q",
		"run.completed r2", "run.failed r3"})
	sameStrings(t, "tenant b's notices", deliveries(t, s, "b"), []string{"decision.pending int_b"})

	all, err := s.ListDeliveries(ctx, "a", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 12 {
		t.Fatalf("%d deliveries of 6 notices to 2 endpoints, want 12", len(all))
	}
	byID := map[string][]string{}
	for _, d := range all {
		byID[d.ID] = append(byID[d.ID], d.Endpoint)
		if d.Status != store.DeliveryPending || d.Attempts != 0 || d.Tenant != "a" {
			t.Fatalf("new delivery: %+v", d)
		}
	}
	for id, eps := range byID {
		slices.Sort(eps)
		sameStrings(t, "endpoints of notice "+id, eps, hooks)
	}
	// The payloads carry what a receiver needs.
	for _, d := range all {
		var data store.NoticeData
		if err := json.Unmarshal(d.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.Tenant != "a" || data.Agent != "refunds" || data.ThreadID != "t" || data.RunID == "" {
			t.Fatalf("%s: %s", d.Type, d.Data)
		}
		switch d.Type {
		case store.NoticeDecisionPending:
			if data.DecisionID == "int_q" && (data.Description != "Refund an order" || data.ApprovalsNeeded != 2 ||
				data.Tool != "refund" || string(data.Args) != `{"orderId":"A1"}` || data.ToolCallID != "call_2") {
				t.Fatalf("pending notice: %s", d.Data)
			}
		case store.NoticeDecisionDecided:
			if data.Decision == nil || !data.Decision.Approved || data.Decision.By != "a/key" || data.Tool != "refund" {
				t.Fatalf("decided notice: %s", d.Data)
			}
			sameTime(t, "decided notice time", d.At, at(time.Second))
		case store.NoticeDecisionExpired:
			if data.Decision == nil || data.Decision.Approved || data.Decision.Via != store.ViaExpiry {
				t.Fatalf("expired notice: %s", d.Data)
			}
		case store.NoticeRunFailed:
			if data.Error != "upstream down" {
				t.Fatalf("failed notice: %s", d.Data)
			}
		}
	}
	// Each notice of thread a/t carries its place among the thread's
	// notices, in the order their facts were stored; every endpoint's
	// delivery the same.
	want := map[string]int64{"int_1": 1, "int_q": 2, "decided int_1": 3, "expired int_q": 4, "r2": 5, "r3": 6}
	for _, d := range all {
		var data store.NoticeData
		_ = json.Unmarshal(d.Data, &data)
		name := data.DecisionID
		switch d.Type {
		case store.NoticeDecisionDecided:
			name = "decided " + name
		case store.NoticeDecisionExpired:
			name = "expired " + name
		case store.NoticeRunCompleted, store.NoticeRunFailed:
			name = data.RunID
		}
		if data.Seq != want[name] {
			t.Fatalf("notice %s has seq %d, want %d: %s", name, data.Seq, want[name], d.Data)
		}
	}
	bs, err := s.ListDeliveries(ctx, "b", 100)
	if err != nil || len(bs) != 2 || !strings.Contains(string(bs[0].Data), `"seq":1`) {
		t.Fatalf("another thread's notices are numbered on their own: %+v, %v", bs, err)
	}
}

// testOutboxDelivery: a claim leases due deliveries to one owner; an
// attempt is recorded only by the owner, and a failed one is due again at
// its NextAt until the schedule gives up.
func testOutboxDelivery(t *testing.T, s store.Store) {
	s.SetWebhooks(hooks)
	ctx := t.Context()
	waiting(t, s, "a", "t", "x", "r1", T0, interrupt("int_1", "call_1", T0))
	claim := func(owner string, now time.Time, endpoints ...string) []store.Delivery {
		t.Helper()
		ds, err := s.ClaimDeliveries(ctx, store.ClaimDeliveries{Endpoints: endpoints, Owner: owner, Now: now,
			LeaseUntil: now.Add(30 * time.Second), Limit: 10})
		if err != nil {
			t.Fatalf("ClaimDeliveries: %v", err)
		}
		return ds
	}
	if ds := claim("w1", T0.Add(-time.Second), hooks...); len(ds) != 0 {
		t.Fatalf("claimed %d deliveries before they were due", len(ds))
	}
	ds := claim("w1", T0, hooks[0])
	if len(ds) != 1 || ds[0].Endpoint != hooks[0] || ds[0].Type != store.NoticeDecisionPending {
		t.Fatalf("claim of one endpoint: %+v", ds)
	}
	d := ds[0]
	if again := claim("w2", at(10*time.Second), hooks[0]); len(again) != 0 {
		t.Fatalf("a leased delivery was claimed again: %+v", again)
	}
	err := s.RecordAttempt(ctx, store.DeliveryAttempt{ID: d.ID, Endpoint: d.Endpoint, Owner: "w2", At: at(time.Second), Delivered: true})
	wantErr(t, "an attempt recorded by another owner", err, store.ErrLeaseLost)
	if err := s.RecordAttempt(ctx, store.DeliveryAttempt{ID: d.ID, Endpoint: d.Endpoint, Owner: "w1", At: at(time.Second),
		HTTPStatus: 503, Error: "503 Service Unavailable", NextAt: at(6 * time.Second)}); err != nil {
		t.Fatalf("RecordAttempt: %v", err)
	}
	if ds := claim("w2", at(5*time.Second), hooks[0]); len(ds) != 0 {
		t.Fatalf("claimed before its next attempt: %+v", ds)
	}
	ds = claim("w2", at(6*time.Second), hooks[0])
	if len(ds) != 1 || ds[0].ID != d.ID || ds[0].Attempts != 1 || ds[0].LastStatus != 503 || ds[0].LastError == "" {
		t.Fatalf("claim of the retry: %+v", ds)
	}
	// The lease lapses (its owner died): another owner takes it over, and
	// the first can no longer record.
	ds = claim("w3", at(40*time.Second), hooks[0])
	if len(ds) != 1 || ds[0].ID != d.ID {
		t.Fatalf("takeover after the lease lapsed: %+v", ds)
	}
	err = s.RecordAttempt(ctx, store.DeliveryAttempt{ID: d.ID, Endpoint: d.Endpoint, Owner: "w2", At: at(41 * time.Second), Delivered: true})
	wantErr(t, "an attempt recorded after the lease was taken over", err, store.ErrLeaseLost)
	if err := s.RecordAttempt(ctx, store.DeliveryAttempt{ID: d.ID, Endpoint: d.Endpoint, Owner: "w3", At: at(41 * time.Second),
		Delivered: true, HTTPStatus: 204}); err != nil {
		t.Fatal(err)
	}
	// The other endpoint's delivery fails for good.
	ds = claim("w1", at(time.Minute), hooks...)
	if len(ds) != 1 || ds[0].Endpoint != hooks[1] {
		t.Fatalf("claim after one delivered: %+v", ds)
	}
	if err := s.RecordAttempt(ctx, store.DeliveryAttempt{ID: ds[0].ID, Endpoint: hooks[1], Owner: "w1", At: at(time.Minute),
		Error: "connection refused"}); err != nil {
		t.Fatal(err)
	}
	if ds := claim("w1", at(time.Hour), hooks...); len(ds) != 0 {
		t.Fatalf("finished deliveries were claimed: %+v", ds)
	}
	list, err := s.ListDeliveries(ctx, "a", 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Delivery{}
	for _, d := range list {
		got[d.Endpoint] = d
	}
	if a := got[hooks[0]]; a.Status != store.DeliveryDelivered || a.Attempts != 2 || a.LastStatus != 204 || a.DeliveredAt == nil {
		t.Fatalf("delivered: %+v", a)
	}
	if b := got[hooks[1]]; b.Status != store.DeliveryFailed || b.Attempts != 1 || b.LastError != "connection refused" {
		t.Fatalf("failed: %+v", b)
	}
	if other, _ := s.ListDeliveries(ctx, "b", 10); len(other) != 0 {
		t.Fatalf("tenant b sees tenant a's deliveries: %+v", other)
	}
	// Sweeping: finished deliveries of notices older than the cut go.
	if n, err := s.SweepDeliveries(ctx, T0, T0); err != nil || n != 0 {
		t.Fatalf("sweep before the notice: %d, %v", n, err)
	}
	if n, err := s.SweepDeliveries(ctx, at(time.Second), T0); err != nil || n != 2 {
		t.Fatalf("sweep after: %d, %v; want 2", n, err)
	}
	// A delivery pending past the stale cut (its endpoint was removed) is
	// marked failed, then swept like the others.
	waiting(t, s, "a", "t2", "x", "r1", at(time.Hour), interrupt("int_2", "call_1", at(time.Hour)))
	if n, err := s.SweepDeliveries(ctx, at(time.Hour), at(time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep at the stale cut: %d, %v", n, err)
	}
	if ds, _ := s.ListDeliveries(ctx, "a", 10); len(ds) != 2 || ds[0].Status != store.DeliveryPending {
		t.Fatalf("deliveries not yet stale: %+v", ds)
	}
	if n, err := s.SweepDeliveries(ctx, at(time.Hour), at(2*time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep past the stale cut: %d, %v", n, err)
	}
	ds, _ = s.ListDeliveries(ctx, "a", 10)
	for _, d := range ds {
		if d.Status != store.DeliveryFailed || d.LastError != store.StaleDelivery {
			t.Fatalf("a stale delivery: %+v", d)
		}
	}
	if n, err := s.SweepDeliveries(ctx, at(2*time.Hour), at(2*time.Hour)); err != nil || n != 2 {
		t.Fatalf("sweep of the stale deliveries: %d, %v; want 2", n, err)
	}
}

// testConcurrentDeliveries: concurrent claimers (replicas) never lease the
// same delivery.
func testConcurrentDeliveries(t *testing.T, s store.Store) {
	s.SetWebhooks(hooks[:1])
	for i := range 12 {
		waiting(t, s, "a", fmt.Sprintf("t%d", i), "x", "r1", T0, interrupt(fmt.Sprintf("int_%d", i), "call_1", T0))
	}
	var (
		mu  sync.Mutex
		got = map[string]string{}
	)
	errs := race(racers, func(i int) error {
		owner := fmt.Sprintf("w%d", i)
		for {
			ds, err := s.ClaimDeliveries(t.Context(), store.ClaimDeliveries{Endpoints: hooks[:1], Owner: owner,
				Now: at(time.Second), LeaseUntil: at(time.Minute), Limit: 2})
			if err != nil || len(ds) == 0 {
				return err
			}
			mu.Lock()
			for _, d := range ds {
				if prev, ok := got[d.ID]; ok {
					mu.Unlock()
					return fmt.Errorf("delivery %s claimed by %s and %s", d.ID, prev, owner)
				}
				got[d.ID] = owner
			}
			mu.Unlock()
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(got) != 12 {
		t.Fatalf("%d of 12 deliveries claimed", len(got))
	}
}
