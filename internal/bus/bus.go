// Package bus fans live run events out to subscribers of a thread (the thread
// event stream, Studio). It is in-process; the PostgreSQL deployment bridges
// it across replicas.
package bus

import (
	"sync"

	"github.com/stackbone/stackbone/internal/event"
)

// Bus delivers events published for a (tenant, thread) to its subscribers.
// A slow subscriber loses events rather than slowing the run down, and is
// told so on its Dropped channel: stored events (Seq > 0) can be read again
// from the store, live-only ones are gone.
type Bus struct {
	// OnPublish, when set, also receives every event given to Publish (not
	// PublishLocal): the PostgreSQL bridge forwards them to other replicas.
	// Set it before the bus is used; it must not block.
	OnPublish func(tenant, thread string, e event.Event)

	mu   sync.RWMutex
	subs map[key]map[*Subscription]struct{}
}

// key names what a subscription listens to: one thread of a tenant, or
// (thread "") every thread of it.
type key struct{ tenant, thread string }

// Subscription receives events on C until Close. Every subscriber of an
// event gets the same *event.Event: read it, never change it. (Pointers
// keep a subscription's buffer small: an idle stream holds a buffer of
// pointers, not of events.)
type Subscription struct {
	C chan *event.Event
	// Dropped receives a value when events were dropped because C was
	// full (one pending value stands for any number of drops). A consumer
	// that must not miss a stored event reads the store again after the
	// last Seq it has.
	Dropped <-chan struct{}

	dropped chan struct{}
	bus     *Bus
	key     key
	once    sync.Once
}

// New returns an empty bus.
func New() *Bus {
	return &Bus{subs: map[key]map[*Subscription]struct{}{}}
}

// Subscribe listens to one thread of a tenant.
func (b *Bus) Subscribe(tenant, thread string) *Subscription {
	return b.subscribe(key{tenant, thread}, 256)
}

// SubscribeTenant listens to every thread of a tenant.
func (b *Bus) SubscribeTenant(tenant string) *Subscription {
	return b.subscribe(key{tenant, ""}, 256)
}

func (b *Bus) subscribe(k key, buffer int) *Subscription {
	s := &Subscription{C: make(chan *event.Event, buffer), dropped: make(chan struct{}, 1), bus: b, key: k}
	s.Dropped = s.dropped
	b.mu.Lock()
	m := b.subs[k]
	if m == nil {
		m = map[*Subscription]struct{}{}
		b.subs[k] = m
	}
	m[s] = struct{}{}
	b.mu.Unlock()
	return s
}

// controlPrefix starts the tenant name of a thread's control topic: no
// tenant's name holds a NUL byte, so no events subscriber listens to it.
const controlPrefix = "\x00control\x00"

// SubscribeControl listens to a thread's control topic: what is asked of
// the run that holds the thread (a cancel request), apart from its events.
func (b *Bus) SubscribeControl(tenant, thread string) *Subscription {
	return b.subscribe(key{controlPrefix + tenant, thread}, 8)
}

// PublishControl delivers e to the subscribers of the thread's control
// topic; no subscriber of the thread's events, or of its tenant's, sees it.
// OnPublish receives it as any event (under the topic's own tenant name),
// so a bridge carries it to the other replicas, where PublishLocal
// delivers it to the same topic.
func (b *Bus) PublishControl(tenant, thread string, e event.Event) {
	b.Publish(controlPrefix+tenant, thread, e)
}

// Publish delivers e to the thread's subscribers without blocking, and
// hands it to OnPublish.
func (b *Bus) Publish(tenant, thread string, e event.Event) {
	b.PublishLocal(tenant, thread, e)
	if f := b.OnPublish; f != nil {
		f(tenant, thread, e)
	}
}

// PublishLocal delivers e to the thread's subscribers in this process
// without blocking; a bridge republishes other replicas' events with it.
func (b *Bus) PublishLocal(tenant, thread string, e event.Event) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	keys := []key{{tenant, thread}, {tenant, ""}}
	if thread == "" {
		keys = keys[1:] // a tenant-wide event (a stateless turn's decision): once
	}
	var p *event.Event // one copy, shared by every subscriber
	for _, k := range keys {
		for s := range b.subs[k] {
			if p == nil {
				cp := e // a copy: taking e's address would move every call's e to the heap
				p = &cp
			}
			select {
			case s.C <- p:
			default:
				select {
				case s.dropped <- struct{}{}:
				default: // already signalled
				}
			}
		}
	}
}

// Drain discards what C holds: after a drop, what is buffered is stale.
func (s *Subscription) Drain() {
	for len(s.C) > 0 {
		<-s.C
	}
}

// Close stops the subscription.
func (s *Subscription) Close() {
	s.once.Do(func() {
		b := s.bus
		b.mu.Lock()
		if m := b.subs[s.key]; m != nil {
			delete(m, s)
			if len(m) == 0 {
				delete(b.subs, s.key)
			}
		}
		b.mu.Unlock()
	})
}
