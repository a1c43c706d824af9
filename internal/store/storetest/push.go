package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// A2A push notification configs, and the outbox deliveries the
// transactions writing a turn's status events queue for them.

// pushEncoder encodes the status events as {"taskId", "contextId", "type"}.
func pushEncoder(contextID string, e event.Event) ([]byte, bool) {
	b, _ := json.Marshal(map[string]string{"taskId": store.PushTaskID, "contextId": contextID, "type": string(e.Type)})
	return b, true
}

func pushConfig(tenant, id, task, thread string, turn int64) store.PushConfig {
	return store.PushConfig{Tenant: tenant, ID: id, TaskID: task, ThreadID: thread, TurnSeq: turn, URL: "https://hooks.example/" + id,
		Token: "tok-" + id, AuthScheme: "Bearer", AuthCredentials: "cred-" + id}
}

// testPushConfigs: create, get, list, replace, delete (idempotent), per
// tenant; at most MaxPushConfigs per task; an id of another task's config
// is refused.
func testPushConfigs(t *testing.T, s store.Store) {
	ctx := t.Context()
	th := begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "hi"))
	turn := th.Turn.Seq
	p1 := pushConfig("a", "p1", "r1", "t", turn)
	p1.CreatedAt = T0
	if err := s.CreatePushConfig(ctx, p1); err != nil {
		t.Fatalf("CreatePushConfig: %v", err)
	}
	got, err := s.GetPushConfig(ctx, "a", "r1", "p1")
	if err != nil || got.URL != p1.URL || got.Token != "tok-p1" || got.AuthScheme != "Bearer" || got.AuthCredentials != "cred-p1" ||
		got.ThreadID != "t" || got.TurnSeq != turn || !got.CreatedAt.Equal(T0) {
		t.Fatalf("GetPushConfig: %+v %v", got, err)
	}
	if _, err := s.GetPushConfig(ctx, "a", "", "p1"); err != nil {
		t.Fatalf("GetPushConfig of any task: %v", err)
	}
	for _, c := range [][3]string{{"b", "r1", "p1"}, {"a", "r2", "p1"}, {"a", "r1", "nope"}} {
		if _, err := s.GetPushConfig(ctx, c[0], c[1], c[2]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetPushConfig %v: %v, want ErrNotFound", c, err)
		}
	}
	// The same id for the same task replaces it.
	p1.URL = "https://hooks.example/p1-new"
	if err := s.CreatePushConfig(ctx, p1); err != nil {
		t.Fatalf("CreatePushConfig again: %v", err)
	}
	if got, _ := s.GetPushConfig(ctx, "a", "r1", "p1"); got == nil || got.URL != p1.URL {
		t.Fatalf("the replaced config: %+v", got)
	}
	// Another tenant's config of the same id is its own.
	if err := s.CreatePushConfig(ctx, pushConfig("b", "p1", "r1", "t", turn)); err != nil {
		t.Fatalf("CreatePushConfig of tenant b: %v", err)
	}
	// Another task of the tenant cannot take the id.
	if err := s.CreatePushConfig(ctx, pushConfig("a", "p1", "r9", "t", turn)); !errors.Is(err, store.ErrPushConfigTaken) {
		t.Fatalf("an id of another task's config: %v, want ErrPushConfigTaken", err)
	}
	for i := 2; i <= store.MaxPushConfigs; i++ {
		c := pushConfig("a", "p"+string(rune('a'+i)), "r1", "t", turn)
		c.CreatedAt = T0.Add(time.Duration(i) * time.Second)
		if err := s.CreatePushConfig(ctx, c); err != nil {
			t.Fatalf("CreatePushConfig %d: %v", i, err)
		}
	}
	if err := s.CreatePushConfig(ctx, pushConfig("a", "over", "r1", "t", turn)); !errors.Is(err, store.ErrPushConfigLimit) {
		t.Fatalf("config %d: %v, want ErrPushConfigLimit", store.MaxPushConfigs+1, err)
	}
	list, err := s.ListPushConfigs(ctx, "a", "r1")
	if err != nil || len(list) != store.MaxPushConfigs || list[0].ID != "p1" {
		t.Fatalf("ListPushConfigs: %d %v", len(list), err)
	}
	if bl, _ := s.ListPushConfigs(ctx, "b", "r1"); len(bl) != 1 {
		t.Fatalf("tenant b's configs: %+v", bl)
	}
	for range 2 {
		if err := s.DeletePushConfig(ctx, "a", "r1", "p1"); err != nil {
			t.Fatalf("DeletePushConfig: %v", err)
		}
	}
	if _, err := s.GetPushConfig(ctx, "a", "r1", "p1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a deleted config: %v", err)
	}
	if _, err := s.GetPushConfig(ctx, "b", "r1", "p1"); err != nil {
		t.Fatalf("tenant b's config after a's was deleted: %v", err)
	}
}

// pushRows claims every due push delivery and returns them as "endpoint
// type taskId contextId", sorted.
func pushRows(t *testing.T, s store.Store, now time.Time) []string {
	t.Helper()
	ds, err := s.ClaimDeliveries(t.Context(), store.ClaimDeliveries{Push: true, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 100})
	if err != nil {
		t.Fatalf("ClaimDeliveries push: %v", err)
	}
	out := []string{}
	for _, d := range ds {
		var b map[string]string
		if err := json.Unmarshal(d.Data, &b); err != nil || d.Type != store.NoticeA2APush {
			t.Fatalf("push delivery %s %s: %v", d.Type, d.Data, err)
		}
		out = append(out, d.Endpoint+" "+b["type"]+" "+b["taskId"]+" "+b["contextId"])
		if err := s.RecordAttempt(t.Context(), store.DeliveryAttempt{ID: d.ID, Endpoint: d.Endpoint, Owner: "o", At: now, Delivered: true, HTTPStatus: 200}); err != nil {
			t.Fatalf("RecordAttempt: %v", err)
		}
	}
	slices.Sort(out)
	return out
}

// testPushDeliveries: a turn's status events (its runs' start, end and
// error) queue one delivery per config of that turn, with the config's
// task id, in the transaction that writes them; a later turn's do not; a
// deleted config's pending deliveries go; QueuePush queues one; the
// webhook endpoints' claims never take push deliveries.
func testPushDeliveries(t *testing.T, s store.Store) {
	ctx := t.Context()
	s.SetWebhooks(hooks)
	s.SetPushEncoder(pushEncoder)
	th := begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "hi"))
	for _, id := range []string{"p1", "p2"} {
		if err := s.CreatePushConfig(ctx, pushConfig("a", id, "r1", "t", th.Turn.Seq)); err != nil {
			t.Fatal(err)
		}
	}
	// A checkpoint without status events queues nothing; the end of the
	// run (here: paused on a decision) queues one per config.
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r1", Events: []event.Event{{Type: event.TextDelta, Delta: "x"}},
		Interrupts: []store.Interrupt{interrupt("int_1", "call_1", T0)}})
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Waiting, Now: at(time.Second),
		Events: []event.Event{{Type: event.RunFinished}}}); err != nil {
		t.Fatal(err)
	}
	far := time.Now().Add(24 * time.Hour) // a checkpoint stamps its rows with the store clock's now
	sameStrings(t, "push deliveries of the paused run", pushRows(t, s, far),
		[]string{"a2a:p1 " + string(event.RunFinished) + " r1 t", "a2a:p2 " + string(event.RunFinished) + " r1 t"})
	// The webhook endpoints' claim takes their own notices only.
	ds, err := s.ClaimDeliveries(ctx, store.ClaimDeliveries{Endpoints: hooks, Owner: "w", Now: far, LeaseUntil: far.Add(time.Minute), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Type == store.NoticeA2APush {
			t.Fatalf("a webhook claim took a push delivery: %+v", d)
		}
	}
	// The resume (same turn) starts and ends: both queue.
	decide(t, s, "a", "int_1", true, at(2*time.Second))
	if _, err := s.Claim(ctx, store.Claim{Tenant: "a", ThreadID: "t", RunID: "r2", Owner: "o2", Now: at(3 * time.Second), LeaseUntil: at(time.Minute)}); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	checkpoint(t, s, store.Checkpoint{Tenant: "a", ThreadID: "t", RunID: "r2", Events: []event.Event{{Type: event.RunStarted}}})
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r2", Status: store.Idle, Now: at(4 * time.Second),
		Events: []event.Event{{Type: event.RunError, Code: "x"}}}); err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "push deliveries of the resume", pushRows(t, s, far),
		[]string{"a2a:p1 " + string(event.RunError) + " r1 t", "a2a:p1 " + string(event.RunStarted) + " r1 t", "a2a:p2 " + string(event.RunError) + " r1 t", "a2a:p2 " + string(event.RunStarted) + " r1 t"})
	// The next turn is another task: its events go to none of these.
	begin(t, s, "a", "t", "x", "r3", at(5*time.Second), userMsg("m3", "again"))
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r3", Status: store.Idle, Now: at(6 * time.Second),
		Events: []event.Event{{Type: event.RunFinished}}}); err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "push deliveries of the next turn", pushRows(t, s, far), []string{})
	// QueuePush queues one, with the config's task id; a deleted
	// config's pending deliveries go with it.
	if err := s.QueuePush(ctx, "a", "p1", []byte(`{"taskId":"`+store.PushTaskID+`","contextId":"t","type":"queued"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.QueuePush(ctx, "b", "p1", []byte(`{"type":"other tenant"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.QueuePush(ctx, "a", "p2", []byte(`{"taskId":"`+store.PushTaskID+`","contextId":"t","type":"queued"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePushConfig(ctx, "a", "r1", "p2"); err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "queued push deliveries", pushRows(t, s, far), []string{"a2a:p1 queued r1 t"})
}

// testPushQueuedTurn: a config registered for a queued turn (turn 0, its
// task id the run it will start as) takes the turn when it starts, whose
// start and end it hears, resume included.
func testPushQueuedTurn(t *testing.T, s store.Store) {
	ctx := t.Context()
	s.SetPushEncoder(pushEncoder)
	begin(t, s, "a", "t", "x", "r1", T0, userMsg("m1", "hi"))
	enqueue(t, s, "a", "t", "q1", "d1")
	if err := s.CreatePushConfig(ctx, pushConfig("a", "pq", "q1", "t", 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "r1", Status: store.Idle, Now: at(time.Second),
		Events: []event.Event{{Type: event.RunFinished}}}); err != nil {
		t.Fatal(err)
	}
	far := time.Now().Add(24 * time.Hour)
	sameStrings(t, "push deliveries of the turn before", pushRows(t, s, far), []string{})
	if _, err := s.BeginRun(ctx, store.BeginRun{Tenant: "a", ThreadID: "t", Agent: "x", RunID: "q1", Owner: "o", Now: at(2 * time.Second),
		LeaseUntil: at(time.Minute), Input: []message.Message{userMsg("", "second")}, Dequeue: "q1",
		Events: []event.Event{{Type: event.RunStarted}}}); err != nil {
		t.Fatal(err)
	}
	th := getThread(t, s, "a", "t")
	if c, err := s.GetPushConfig(ctx, "a", "q1", "pq"); err != nil || c.TurnSeq != th.Turn.Seq || c.TurnSeq == 0 {
		t.Fatalf("the config after its turn started: %+v %v (turn %d)", c, err, th.Turn.Seq)
	}
	if err := s.FinishRun(ctx, store.FinishRun{Tenant: "a", ThreadID: "t", RunID: "q1", Status: store.Idle, Now: at(3 * time.Second),
		Events: []event.Event{{Type: event.RunFinished}}}); err != nil {
		t.Fatal(err)
	}
	sameStrings(t, "push deliveries of the queued turn", pushRows(t, s, far),
		[]string{"a2a:pq " + string(event.RunFinished) + " q1 t", "a2a:pq " + string(event.RunStarted) + " q1 t"})
}
