package bus

import (
	"testing"

	"github.com/stackbone/stackbone/internal/event"
)

func TestDeliveryIsScopedToTenantAndThread(t *testing.T) {
	b := New()
	thread := b.Subscribe("acme", "t1")
	tenant := b.SubscribeTenant("acme")
	other := b.SubscribeTenant("beta")
	b.Publish("acme", "t1", event.Event{Type: event.RunStarted})
	b.Publish("acme", "t2", event.Event{Type: event.RunFinished})
	b.Publish("beta", "t1", event.Event{Type: event.RunError})

	if got := len(thread.C); got != 1 || (<-thread.C).Type != event.RunStarted {
		t.Fatalf("the thread subscriber got %d events", got)
	}
	if got := len(tenant.C); got != 2 {
		t.Fatalf("the tenant subscriber got %d events, want its tenant's 2", got)
	}
	if got := len(other.C); got != 1 || (<-other.C).Type != event.RunError {
		t.Fatalf("another tenant's subscriber got %d events", got)
	}
}

func TestSlowSubscriberDoesNotBlockAndCloseStops(t *testing.T) {
	b := New()
	s := b.Subscribe("acme", "t1")
	for i := 0; i < 1000; i++ { // far past the buffer: must not block
		b.Publish("acme", "t1", event.Event{Type: event.TextDelta})
	}
	if len(s.C) != cap(s.C) {
		t.Fatalf("buffer holds %d of %d", len(s.C), cap(s.C))
	}
	s.Close()
	s.Close() // idempotent
	for len(s.C) > 0 {
		<-s.C
	}
	b.Publish("acme", "t1", event.Event{Type: event.RunStarted})
	if len(s.C) != 0 {
		t.Fatal("a closed subscription still receives")
	}
}

func TestOnPublishSeesPublishNotPublishLocal(t *testing.T) {
	b := New()
	var seen []event.Type
	b.OnPublish = func(_, _ string, e event.Event) { seen = append(seen, e.Type) }
	b.Publish("a", "t", event.Event{Type: event.RunStarted})
	b.PublishLocal("a", "t", event.Event{Type: event.RunFinished})
	if len(seen) != 1 || seen[0] != event.RunStarted {
		t.Fatalf("OnPublish saw %v", seen)
	}
}

func TestDropIsSignalled(t *testing.T) {
	b := New()
	s := b.Subscribe("acme", "t1")
	defer s.Close()
	for i := 0; i < cap(s.C); i++ {
		b.Publish("acme", "t1", event.Event{Type: event.TextDelta})
	}
	select {
	case <-s.Dropped:
		t.Fatal("a drop was signalled while the buffer still had room")
	default:
	}
	b.Publish("acme", "t1", event.Event{Type: event.RunFinished, Seq: 9}) // dropped
	b.Publish("acme", "t1", event.Event{Type: event.RunStarted, Seq: 10}) // dropped: one signal stands for both
	select {
	case <-s.Dropped:
	default:
		t.Fatal("a dropped event was not signalled")
	}
	select {
	case <-s.Dropped:
		t.Fatal("two drops left two signals")
	default:
	}
}

// TestControlTopicApart: a control event reaches the thread's control
// subscribers and OnPublish, never the thread's or the tenant's event
// subscribers; an event reaches no control subscriber.
func TestControlTopicApart(t *testing.T) {
	b := New()
	var forwarded []string
	b.OnPublish = func(tenant, thread string, e event.Event) { forwarded = append(forwarded, tenant+"/"+thread) }
	ctl := b.SubscribeControl("acme", "t1")
	defer ctl.Close()
	evs, all := b.Subscribe("acme", "t1"), b.SubscribeTenant("acme")
	defer evs.Close()
	defer all.Close()

	b.PublishControl("acme", "t1", event.Event{Type: event.ControlChanged, RunID: "r1"})
	b.Publish("acme", "t1", event.Event{Type: event.TextDelta})
	if len(ctl.C) != 1 || (<-ctl.C).Type != event.ControlChanged {
		t.Fatalf("control subscriber: want the one control event")
	}
	if len(evs.C) != 1 || len(all.C) != 1 {
		t.Fatalf("event subscribers got %d and %d events, want the one event each", len(evs.C), len(all.C))
	}
	if len(forwarded) != 2 || forwarded[0] == "acme/t1" {
		t.Fatalf("OnPublish got %q: want the control event under its own topic, then the event", forwarded)
	}
	// What a bridge delivers on another replica reaches the same topic.
	b.PublishLocal(forwarded[0][:len(forwarded[0])-len("/t1")], "t1", event.Event{Type: event.ControlChanged})
	if len(ctl.C) != 1 || len(evs.C) != 1 {
		t.Fatalf("a bridged control event: control %d, events %d", len(ctl.C), len(evs.C))
	}
}
