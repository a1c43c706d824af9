package stacktest

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// CountingStore wraps a store and counts the calls made to it, per method
// and per the package that made each call (the first frame of the stack
// outside internal/store and this wrapper: "engine", "wire/mcp", "server",
// …): what a request costs the store, and who asks. Ping, LastWrite,
// ProbeWrite, Close and SetWebhooks are not counted (health and setup).
// Pass it as Options.Store.
type CountingStore struct {
	store.Store
	mu    sync.Mutex
	calls map[Call]int
}

// Call is one counted kind of store call: the method, and the package of
// the code that called it.
type Call struct {
	Layer, Method string
}

// Counts are store calls by kind.
type Counts map[Call]int

// NewCountingStore wraps st.
func NewCountingStore(st store.Store) *CountingStore {
	return &CountingStore{Store: st, calls: map[Call]int{}}
}

// Reset forgets the calls counted so far.
func (cw *CountingStore) Reset() {
	cw.mu.Lock()
	cw.calls = map[Call]int{}
	cw.mu.Unlock()
}

// Counts returns the calls counted since the last Reset.
func (cw *CountingStore) Counts() Counts {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return maps.Clone(cw.calls)
}

// Total is the number of calls; of the given layers only, when any are named.
func (c Counts) Total(layers ...string) int {
	n := 0
	for k, v := range c {
		if len(layers) == 0 || slices.Contains(layers, k.Layer) {
			n += v
		}
	}
	return n
}

// Method is the number of calls to one method, from any layer.
func (c Counts) Method(m string) int {
	n := 0
	for k, v := range c {
		if k.Method == m {
			n += v
		}
	}
	return n
}

// String lists the counts as "layer: Method×n, …" lines, sorted.
func (c Counts) String() string {
	by := map[string][]string{}
	for k, v := range c {
		by[k.Layer] = append(by[k.Layer], fmt.Sprintf("%s×%d", k.Method, v))
	}
	var b strings.Builder
	for _, l := range slices.Sorted(maps.Keys(by)) {
		slices.Sort(by[l])
		n := 0
		for k, v := range c {
			if k.Layer == l {
				n += v
			}
		}
		fmt.Fprintf(&b, "%s (%d): %s\n", l, n, strings.Join(by[l], ", "))
	}
	return b.String()
}

const modulePrefix = "github.com/stackbone/stackbone/internal/"

func (cw *CountingStore) count(method string) {
	k := Call{Layer: caller(), Method: method}
	cw.mu.Lock()
	cw.calls[k]++
	cw.mu.Unlock()
}

// caller is the package (under internal/, "other" outside) of the code
// that called the store.
func caller() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if rest, ok := strings.CutPrefix(f.Function, modulePrefix); ok {
			// "wire/mcp.(*call).pending" → "wire/mcp"
			slash := strings.LastIndex(rest, "/")
			pkg := rest[:slash+1+strings.Index(rest[slash+1:], ".")]
			if pkg != "stacktest" && pkg != "store" && !strings.HasPrefix(pkg, "store/") {
				return pkg
			}
		}
		if !more {
			return "other"
		}
	}
}

var _ store.Store = (*CountingStore)(nil)

func (cw *CountingStore) GetThread(ctx context.Context, tenant string, id string) (*store.Thread, error) {
	cw.count("GetThread")
	return cw.Store.GetThread(ctx, tenant, id)
}

func (cw *CountingStore) ListThreads(ctx context.Context, tenant string, f store.ThreadFilter) ([]store.Thread, error) {
	cw.count("ListThreads")
	return cw.Store.ListThreads(ctx, tenant, f)
}

func (cw *CountingStore) Messages(ctx context.Context, tenant string, threadID string) ([]message.Message, error) {
	cw.count("Messages")
	return cw.Store.Messages(ctx, tenant, threadID)
}

// SetHead counts and passes the call on.
func (cw *CountingStore) SetHead(ctx context.Context, h store.SetHead) (*store.Thread, error) {
	cw.count("SetHead")
	return cw.Store.SetHead(ctx, h)
}

// Fork counts and passes the call on.
func (cw *CountingStore) Fork(ctx context.Context, f store.Fork) (*store.Thread, error) {
	cw.count("Fork")
	return cw.Store.Fork(ctx, f)
}

func (cw *CountingStore) BeginRun(ctx context.Context, b store.BeginRun) (*store.Begun, error) {
	cw.count("BeginRun")
	return cw.Store.BeginRun(ctx, b)
}

func (cw *CountingStore) Claim(ctx context.Context, c store.Claim) (*store.Thread, error) {
	cw.count("Claim")
	return cw.Store.Claim(ctx, c)
}

func (cw *CountingStore) Checkpoint(ctx context.Context, c store.Checkpoint) error {
	cw.count("Checkpoint")
	return cw.Store.Checkpoint(ctx, c)
}

func (cw *CountingStore) FinishRun(ctx context.Context, f store.FinishRun) error {
	cw.count("FinishRun")
	return cw.Store.FinishRun(ctx, f)
}

func (cw *CountingStore) ReleaseRun(ctx context.Context, r store.ReleaseRun) error {
	cw.count("ReleaseRun")
	return cw.Store.ReleaseRun(ctx, r)
}

func (cw *CountingStore) Stale(ctx context.Context, now time.Time, limit int) ([]store.Thread, error) {
	cw.count("Stale")
	return cw.Store.Stale(ctx, now, limit)
}

func (cw *CountingStore) GetInterrupt(ctx context.Context, tenant string, id string) (*store.Interrupt, error) {
	cw.count("GetInterrupt")
	return cw.Store.GetInterrupt(ctx, tenant, id)
}

func (cw *CountingStore) ListInterrupts(ctx context.Context, tenant string, f store.InterruptFilter) ([]store.Interrupt, error) {
	cw.count("ListInterrupts")
	return cw.Store.ListInterrupts(ctx, tenant, f)
}

func (cw *CountingStore) CallInterrupts(ctx context.Context, tenant string, threadID string, toolCallIDs []string) ([]store.Interrupt, error) {
	cw.count("CallInterrupts")
	return cw.Store.CallInterrupts(ctx, tenant, threadID, toolCallIDs)
}

func (cw *CountingStore) StartedCalls(ctx context.Context, tenant string, threadID string, toolCallIDs []string) ([]string, error) {
	cw.count("StartedCalls")
	return cw.Store.StartedCalls(ctx, tenant, threadID, toolCallIDs)
}

func (cw *CountingStore) Decide(ctx context.Context, tenant string, id string, d store.Decision) (store.DecideResult, error) {
	cw.count("Decide")
	return cw.Store.Decide(ctx, tenant, id, d)
}

func (cw *CountingStore) RecordDecided(ctx context.Context, in store.Interrupt) error {
	cw.count("RecordDecided")
	return cw.Store.RecordDecided(ctx, in)
}

func (cw *CountingStore) ExpiredInterrupts(ctx context.Context, now time.Time, limit int) ([]store.Interrupt, error) {
	cw.count("ExpiredInterrupts")
	return cw.Store.ExpiredInterrupts(ctx, now, limit)
}

func (cw *CountingStore) CountPending(ctx context.Context) (int, error) {
	cw.count("CountPending")
	return cw.Store.CountPending(ctx)
}

func (cw *CountingStore) Events(ctx context.Context, tenant string, threadID string, after int64, limit int) ([]event.Event, error) {
	cw.count("Events")
	return cw.Store.Events(ctx, tenant, threadID, after, limit)
}

func (cw *CountingStore) RevokeSession(ctx context.Context, tenant string, id string, expires time.Time, now time.Time) error {
	cw.count("RevokeSession")
	return cw.Store.RevokeSession(ctx, tenant, id, expires, now)
}

func (cw *CountingStore) SessionRevoked(ctx context.Context, tenant string, id string, now time.Time) (bool, error) {
	cw.count("SessionRevoked")
	return cw.Store.SessionRevoked(ctx, tenant, id, now)
}

func (cw *CountingStore) GetJournal(ctx context.Context, tenant string, key string, now time.Time) (*store.JournalEntry, error) {
	cw.count("GetJournal")
	return cw.Store.GetJournal(ctx, tenant, key, now)
}

func (cw *CountingStore) PutJournal(ctx context.Context, e store.JournalEntry) error {
	cw.count("PutJournal")
	return cw.Store.PutJournal(ctx, e)
}

func (cw *CountingStore) SweepJournal(ctx context.Context, now time.Time) (int, error) {
	cw.count("SweepJournal")
	return cw.Store.SweepJournal(ctx, now)
}

func (cw *CountingStore) PutResponse(ctx context.Context, r store.Response) (*store.Response, bool, error) {
	cw.count("PutResponse")
	return cw.Store.PutResponse(ctx, r)
}

func (cw *CountingStore) GetResponse(ctx context.Context, tenant string, id string) (*store.Response, error) {
	cw.count("GetResponse")
	return cw.Store.GetResponse(ctx, tenant, id)
}

func (cw *CountingStore) NextResponse(ctx context.Context, tenant string, threadID string, seq int64) (*store.Response, error) {
	cw.count("NextResponse")
	return cw.Store.NextResponse(ctx, tenant, threadID, seq)
}

func (cw *CountingStore) CancelResponse(ctx context.Context, tenant string, id string) error {
	cw.count("CancelResponse")
	return cw.Store.CancelResponse(ctx, tenant, id)
}

func (cw *CountingStore) GetMessage(ctx context.Context, tenant string, id string) (*message.Message, error) {
	cw.count("GetMessage")
	return cw.Store.GetMessage(ctx, tenant, id)
}

func (cw *CountingStore) DeleteResponse(ctx context.Context, tenant string, id string) error {
	cw.count("DeleteResponse")
	return cw.Store.DeleteResponse(ctx, tenant, id)
}

func (cw *CountingStore) ClaimResponseKey(ctx context.Context, k store.ResponseKey, replace string) (*store.ResponseKey, bool, error) {
	cw.count("ClaimResponseKey")
	return cw.Store.ClaimResponseKey(ctx, k, replace)
}

func (cw *CountingStore) GetResponseKey(ctx context.Context, tenant string, key string) (*store.ResponseKey, error) {
	cw.count("GetResponseKey")
	return cw.Store.GetResponseKey(ctx, tenant, key)
}

func (cw *CountingStore) SweepResponseKeys(ctx context.Context, now time.Time) (int, error) {
	cw.count("SweepResponseKeys")
	return cw.Store.SweepResponseKeys(ctx, now)
}

func (cw *CountingStore) PutConversation(ctx context.Context, c store.Conversation, items []store.ConversationItem) error {
	cw.count("PutConversation")
	return cw.Store.PutConversation(ctx, c, items)
}

func (cw *CountingStore) GetConversation(ctx context.Context, tenant string, id string) (*store.Conversation, error) {
	cw.count("GetConversation")
	return cw.Store.GetConversation(ctx, tenant, id)
}

func (cw *CountingStore) AddConversationItems(ctx context.Context, tenant string, id string, items []store.ConversationItem) error {
	cw.count("AddConversationItems")
	return cw.Store.AddConversationItems(ctx, tenant, id, items)
}

func (cw *CountingStore) ConversationItems(ctx context.Context, tenant string, id string) ([]store.ConversationItem, error) {
	cw.count("ConversationItems")
	return cw.Store.ConversationItems(ctx, tenant, id)
}

func (cw *CountingStore) DeleteConversationItems(ctx context.Context, tenant string, id string, itemIDs []string) (int, error) {
	cw.count("DeleteConversationItems")
	return cw.Store.DeleteConversationItems(ctx, tenant, id, itemIDs)
}

func (cw *CountingStore) ClaimDeliveries(ctx context.Context, c store.ClaimDeliveries) ([]store.Delivery, error) {
	cw.count("ClaimDeliveries")
	return cw.Store.ClaimDeliveries(ctx, c)
}

func (cw *CountingStore) RecordAttempt(ctx context.Context, a store.DeliveryAttempt) error {
	cw.count("RecordAttempt")
	return cw.Store.RecordAttempt(ctx, a)
}

func (cw *CountingStore) ListDeliveries(ctx context.Context, tenant string, limit int) ([]store.Delivery, error) {
	cw.count("ListDeliveries")
	return cw.Store.ListDeliveries(ctx, tenant, limit)
}

func (cw *CountingStore) SweepDeliveries(ctx context.Context, before time.Time, staleBefore time.Time) (int, error) {
	cw.count("SweepDeliveries")
	return cw.Store.SweepDeliveries(ctx, before, staleBefore)
}
