package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/ids"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
	"github.com/stackbone/stackbone/internal/wire/openai"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// Store is what the wire keeps and reads: its response records, the keys
// that find a new conversation's first attempt, and the Conversations
// API's conversations and items (a thread's events it asks the engine
// for: Runner).
type Store interface {
	ClaimResponseKey(ctx context.Context, k store.ResponseKey, replace string) (*store.ResponseKey, bool, error)
	GetResponseKey(ctx context.Context, tenant, key string) (*store.ResponseKey, error)
	Messages(ctx context.Context, tenant, threadID string) ([]message.Message, error)
	PutResponse(ctx context.Context, r store.Response) (*store.Response, bool, error)
	GetResponse(ctx context.Context, tenant, id string) (*store.Response, error)
	NextResponse(ctx context.Context, tenant, threadID string, seq int64) (*store.Response, error)
	TurnEnd(ctx context.Context, tenant, threadID string, turnSeq int64) (int64, error)
	CancelResponse(ctx context.Context, tenant, id string) error
	DeleteResponse(ctx context.Context, tenant, id string) error
	GetThread(ctx context.Context, tenant, id string) (*store.Thread, error)
	GetMessage(ctx context.Context, tenant, id string) (*message.Message, error)
	PutConversation(ctx context.Context, c store.Conversation, items []store.ConversationItem) error
	GetConversation(ctx context.Context, tenant, id string) (*store.Conversation, error)
	AddConversationItems(ctx context.Context, tenant, id string, items []store.ConversationItem) error
	ConversationItems(ctx context.Context, tenant, id string) ([]store.ConversationItem, error)
	DeleteConversationItems(ctx context.Context, tenant, id string, itemIDs []string) (int, error)
}

// Runner is the engine as the wire's other routes use it.
type Runner interface {
	// Follow streams a thread's events from a sequence number on.
	Follow(ctx context.Context, tenant, threadID string, from int64) (*engine.Run, error)
	// Replay yields a thread's stored events between two sequence numbers
	// in their live form (a stored response as it stands).
	Replay(ctx context.Context, tenant, threadID string, from, until int64) iter.Seq2[event.Event, error]
	// Stop stops the thread's running turn, wherever it runs, and waits
	// (bounded: engine.StopWait) until it has stopped (false: still
	// stopping).
	Stop(ctx context.Context, tenant, threadID string) (bool, error)
}

// Config is what the wire needs from the server it is mounted on.
type Config struct {
	Store  Store
	Runner Runner
	// Tenant is the caller's tenant (the server authenticated it).
	Tenant func(ctx context.Context) string
	// Sees, when set, reports whether the caller sees a thread of its
	// tenant owned by owner (per-user threads, store.Sees): a response or
	// conversation of a thread it does not see is a 404. Nil sees all.
	Sees func(ctx context.Context, owner string) bool
	// Owner, when set, is the end user the caller is ("" for a key's
	// caller): a conversation it creates (POST /v1/conversations) is
	// theirs before its first turn makes its thread.
	Owner func(ctx context.Context) string
	// Encode writes a run's events with an encoder, with the server's
	// keepalives: the same loop as every turn's (Server.EncodeRun).
	Encode func(enc wire.Encoder, run *engine.Run) error
	Now    func() time.Time
	NewID  ids.Generator
	// RetryWindow is how long an Idempotency-Key on a request that names
	// no conversation keeps naming that request's first attempt, beyond
	// the time the attempt runs (the engine's JournalTTL; zero: only while
	// it runs).
	RetryWindow time.Duration
}

// Wire is the Responses wire.
type Wire struct{ c Config }

var _ wire.Wire = (*Wire)(nil)

// New makes the wire.
func New(c Config) (*Wire, error) {
	if c.Store == nil || c.Runner == nil || c.Tenant == nil || c.Encode == nil {
		return nil, errors.New("responses: Store, Runner, Tenant and Encode are required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = ids.New
	}
	return &Wire{c: c}, nil
}

// TurnRoute is the Responses route.
func (*Wire) TurnRoute() string { return "POST /v1/responses" }

// SessionHeader: x-stackbone-session names the thread here too (as does
// conversation, or the thread of previous_response_id), and
// Idempotency-Key names a turn for its retries.
func (*Wire) SessionHeader() bool { return true }

// WriteError writes an error in OpenAI's envelope.
func (*Wire) WriteError(w http.ResponseWriter, e *apierror.Error) error {
	return openai.WriteError(w, e)
}

// Routes read, stream again, cancel and delete stored responses, and serve
// the Conversations API (conversations.go).
func (wr *Wire) Routes() map[string]func(http.ResponseWriter, *http.Request) error {
	routes := map[string]func(http.ResponseWriter, *http.Request) error{
		"GET /v1/responses/{id}":             wr.get,
		"DELETE /v1/responses/{id}":          wr.delete,
		"POST /v1/responses/{id}/cancel":     wr.cancel,
		"GET /v1/responses/{id}/input_items": wr.inputItems,
	}
	for pattern, h := range wr.conversationRoutes() {
		routes[pattern] = h
	}
	return routes
}

// record is what a stored response keeps of its request: the response's
// fields that echo it, and its input items.
type record struct {
	Head  Response `json:"head"`
	Input []Item   `json:"input"`
}

// DecodeTurn reads a Responses request.
func (wr *Wire) DecodeTurn(r *http.Request, body []byte) (wire.Turn, error) {
	req, err := DecodeContext(r.Context(), body)
	if err != nil {
		return nil, err
	}
	items, err := req.Items(wr.c.NewID)
	if err != nil {
		return nil, err
	}
	in, origin, err := req.input(items, nil)
	if err != nil {
		return nil, err
	}
	t := &turn{wr: wr, req: req, in: in, origin: origin, items: items, head: wr.head(req)}
	for _, it := range items {
		t.refs = t.refs || it.Type == ItemReference
	}
	return t, nil
}

// head is the response as the request shapes it, before any output.
func (wr *Wire) head(req *Request) Response {
	r := Response{Object: "response", CreatedAt: wr.c.Now().Unix(), Status: StatusInProgress, Background: req.Background,
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Model: req.Model, Output: []OutputItem{},
		ParallelToolCalls: req.ParallelToolCalls == nil || *req.ParallelToolCalls, Store: req.Stored(),
		Temperature: req.Temperature, TopP: req.TopP, Truncation: "disabled", Tools: req.Tools, Metadata: req.Metadata,
		ToolChoice: json.RawMessage(`"auto"`), Text: TextConfig{Format: json.RawMessage(`{"type":"text"}`)}}
	if r.Tools == nil {
		r.Tools = []Tool{}
	}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		r.ToolChoice = req.ToolChoice
	}
	if req.Text != nil && len(req.Text.Format) > 0 && string(req.Text.Format) != "null" {
		r.Text.Format = req.Text.Format
	}
	if req.PreviousResponseID != "" {
		r.PreviousResponseID = &req.PreviousResponseID
	}
	return r
}

type turn struct {
	wr     *Wire
	req    *Request
	in     engine.Input
	origin []int
	items  []Item
	head   Response
	tenant string
	ctx    context.Context
	// refs: the input names stored items (item_reference), resolved once
	// the tenant is known.
	refs bool
	// replay is the first attempt's response a retry is answered with
	// (Replay), when the engine cannot attach it to that turn.
	replay *store.Response
	// retried is the stored response a retry attached to (start found
	// it), nil for a new response.
	retried *store.Response
	// taken are the conversation items (added outside a turn) that the
	// turn's input begins with, dropped from the conversation's pending
	// items once the turn began (they are thread messages then).
	taken []string
}

func (t *turn) Input() engine.Input { return t.in }

// Param places an engine input error on the request's own paths.
func (t *turn) Param(field string, i int) string {
	return wire.Param(field, i, func(i int) string { return t.req.Tools[i].at + ".name" }, t.origin, "input[%d].call_id")
}

// Prepare resolves the turn's thread: store: false is stateless;
// previous_response_id continues that response's thread (the caller's
// own); conversation or x-stackbone-session names one; else a new chain
// starts a new thread, unless it retries a first attempt (newChain).
func (t *turn) Prepare(ctx context.Context, in engine.Input) (engine.Input, error) {
	t.tenant, t.ctx = in.Tenant, context.WithoutCancel(ctx)
	if t.refs {
		if err := t.resolveRefs(ctx, &in); err != nil {
			return in, err
		}
	}
	header := in.ThreadID
	if !t.req.Stored() {
		if header != "" {
			return in, apierror.Invalid("store", "`store: false` asks for a turn that is not kept; drop it, or the x-stackbone-session header.")
		}
		if t.req.PreviousResponseID != "" {
			return in, apierror.Invalid("previous_response_id", "`previous_response_id` continues a stored conversation: it needs `store: true`.")
		}
		return in, nil
	}
	thread, err := t.req.ConversationID()
	if err != nil {
		return in, err
	}
	if prev := t.req.PreviousResponseID; prev != "" {
		rec, err := t.wr.c.Store.GetResponse(ctx, in.Tenant, prev)
		if errors.Is(err, store.ErrNotFound) {
			e := apierror.New(apierror.NotFound, "previous_response_not_found", fmt.Sprintf("Previous response with id '%s' not found.", prev))
			e.Param = "previous_response_id"
			return in, e
		}
		if err != nil {
			return in, err
		}
		if in.Continues, err = t.continues(ctx, rec); err != nil {
			return in, err
		}
		thread = rec.ThreadID
	}
	switch {
	case thread != "" && header != "" && thread != header:
		return in, apierror.Invalid(wire.SessionHeader, "The x-stackbone-session header names another conversation than the request's body.")
	case thread == "":
		thread = header
	}
	if thread == "" {
		if thread, err = t.continued(ctx, in); err != nil {
			return in, err
		}
	}
	if thread == "" {
		if thread, err = t.newChain(ctx, in); err != nil {
			return in, err
		}
	}
	if err := t.conversationInput(ctx, &in, thread); err != nil {
		return in, err
	}
	in.ThreadID = thread
	t.head.Conversation = &Conversation{ID: thread}
	t.in = in
	return in, nil
}

// resolveRefs maps the input again, now with each item_reference replaced
// by the tenant's stored message it names.
func (t *turn) resolveRefs(ctx context.Context, in *engine.Input) error {
	msgs, origin, err := Messages(t.req.Instructions, t.items, func(id string) (*message.Message, error) {
		m, err := t.wr.c.Store.GetMessage(ctx, t.tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			e := apierror.New(apierror.NotFound, "item_not_found", fmt.Sprintf("Item with id '%s' not found.", id))
			e.Param = "input"
			return nil, e
		}
		return m, err
	})
	if err != nil {
		return err
	}
	in.Messages, t.origin = msgs, origin
	return nil
}

// continues names the response a request continues for the engine
// (engine.Continuation): the turn that followed it, by the thread's next
// response, and, when there is one, where its own turn ended, which a new
// turn goes on from on a new branch.
func (t *turn) continues(ctx context.Context, prev *store.Response) (*engine.Continuation, error) {
	c := &engine.Continuation{Name: prev.ID}
	next, err := t.wr.c.Store.NextResponse(ctx, t.tenant, prev.ThreadID, prev.Seq)
	if errors.Is(err, store.ErrNotFound) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	c.Next = next.Seq
	c.From, err = t.wr.c.Store.TurnEnd(ctx, t.tenant, prev.ThreadID, prev.Seq)
	if errors.Is(err, store.ErrNotFound) {
		return c, nil // its turn never ended: it cannot be gone on from
	}
	return c, err
}

// Encoder answers the turn: a stream of events, a background response at
// once, or one response object.
func (t *turn) Encoder(w http.ResponseWriter, run *engine.Run) wire.Encoder {
	var sw *sse.Writer
	var sink Sink
	if t.req.Stream {
		sw = sse.NewBuffered(w)
		sink = sw.Event
	}
	f := newFold(t.head, sink, -1)
	f.start = t.start
	if t.req.Stored() {
		f.end = t.remember
	}
	if sw != nil {
		f.flush = sw.Flush
	}
	switch {
	case t.req.Stream:
		return &stream{fold: f, sw: sw, w: w}
	case t.req.Background:
		return &background{fold: f, w: w, run: run, turn: t}
	}
	var werr error
	return wire.Collect(w, func(e event.Event) {
		if err := f.Write(e); err != nil && werr == nil {
			werr = err
		}
	}, func() (*Response, error) {
		if werr != nil {
			return nil, werr
		}
		if f.err != nil {
			return nil, f.err
		}
		if !f.ended {
			return nil, apierror.IncompleteRun()
		}
		r := f.snapshot()
		return &r, nil
	})
}

// start names the response at its turn's first event: a stored response
// gets its record (a retry attached to the turn gets the record of its
// first attempt); a stateless one a fresh id.
func (t *turn) start(seq int64) (string, error) {
	if !t.req.Stored() || seq == 0 {
		return t.wr.c.NewID("resp"), nil
	}
	head := t.head
	head.Status, head.Output = "", nil
	rec, err := json.Marshal(record{Head: head, Input: t.items})
	if err != nil {
		return "", err
	}
	r, created, err := t.wr.c.Store.PutResponse(t.ctx, store.Response{ID: t.wr.c.NewID("resp"),
		Tenant: t.tenant, ThreadID: t.in.ThreadID, Seq: seq, PreviousID: t.req.PreviousResponseID, Background: t.req.Background,
		Request: rec, CreatedAt: time.Unix(t.head.CreatedAt, 0)})
	if err != nil {
		return "", err
	}
	if !created {
		// A retry: the response is its first attempt's, created then.
		t.head.CreatedAt = r.CreatedAt.Unix()
		t.retried = r
	}
	if len(t.taken) > 0 {
		// Best effort: a turn that began lists them as thread messages
		// (the same ids) and a later turn drops any still here.
		_, _ = t.wr.c.Store.DeleteConversationItems(t.ctx, t.tenant, t.in.ThreadID, t.taken)
	}
	return r.ID, nil
}

// stream answers with server-sent events.
type stream struct {
	fold *fold
	sw   *sse.Writer
	w    http.ResponseWriter
}

func (s *stream) Write(e event.Event) error {
	err := s.fold.Write(e)
	var se *startError
	if errors.As(err, &se) {
		reportStart(s.w, s.sw, se)
	}
	return err
}

// reportStart tells the client its response could not be stored, in
// OpenAI's error envelope: the turn's first event names the response, so
// nothing was sent yet. (The run goes on; its thread keeps it.)
func reportStart(w http.ResponseWriter, sw *sse.Writer, se *startError) {
	if sw == nil || !sw.Started() {
		_ = openai.WriteError(w, apierror.From(se.err))
	}
}

func (s *stream) Close(err *apierror.Error) error {
	if err != nil && !s.fold.ended {
		_ = s.fold.Write(event.Event{Type: event.RunError, Code: err.Code, Message: err.Message})
	}
	return nil
}

func (s *stream) Ping() error { return s.sw.Comment("keepalive") }

func (s *stream) Flush() error { return s.sw.Flush() }

// errDetached ends a background response's request once it is answered;
// its run goes on.
var errDetached = errors.New("responses: background response answered")

// background answers at once with the response in progress; the run goes
// on without the client.
type background struct {
	fold *fold
	w    http.ResponseWriter
	run  *engine.Run
	turn *turn
}

func (b *background) Write(e event.Event) error {
	if err := b.fold.Write(e); err != nil {
		var se *startError
		if errors.As(err, &se) {
			reportStart(b.w, nil, se)
		}
		return err
	}
	if e.Type != event.RunStarted && !b.fold.ended {
		return nil
	}
	r := b.fold.snapshot()
	if sr := b.turn.retried; sr != nil {
		// A retry: the response as it stands (its attempt may be over).
		rec, err := recordOf(sr)
		if err != nil {
			return err
		}
		cur, err := b.turn.wr.current(b.turn.ctx, sr, rec)
		if err != nil {
			return err
		}
		r = *cur
	}
	if err := httpjson.Write(b.w, http.StatusOK, &r); err != nil {
		return err
	}
	return errDetached
}

func (b *background) Close(err *apierror.Error) error {
	if err != nil {
		return err
	}
	return nil
}

// load reads a stored response's record.
func (wr *Wire) load(r *http.Request) (*store.Response, record, error) {
	sr, err := wr.c.Store.GetResponse(r.Context(), wr.c.Tenant(r.Context()), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		return nil, record{}, notFound(r.PathValue("id"))
	}
	if err != nil {
		return nil, record{}, err
	}
	if wr.c.Sees != nil {
		th, err := wr.c.Store.GetThread(r.Context(), sr.Tenant, sr.ThreadID)
		if err == nil && !wr.c.Sees(r.Context(), th.Owner) {
			return nil, record{}, notFound(r.PathValue("id"))
		}
	}
	rec, err := recordOf(sr)
	return sr, rec, err
}

// recordOf decodes a stored response's record, with the response's id and
// conversation.
func recordOf(sr *store.Response) (record, error) {
	var rec record
	if err := json.Unmarshal(sr.Request, &rec); err != nil {
		return rec, fmt.Errorf("responses: record of %s: %w", sr.ID, err)
	}
	rec.Head.ID, rec.Head.Object = sr.ID, "response"
	rec.Head.Conversation = &Conversation{ID: sr.ThreadID}
	return rec, nil
}

func notFound(id string) error {
	e := apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("Response with id '%s' not found.", id))
	return e
}

// get returns a stored response as it stands (?stream=true: its events
// again, from starting_after on, then live until it ends).
func (wr *Wire) get(w http.ResponseWriter, r *http.Request) error {
	sr, rec, err := wr.load(r)
	if err != nil {
		return err
	}
	streaming, err := wantsStream(r)
	if err != nil {
		return err
	}
	if streaming {
		after, err := startingAfter(r)
		if err != nil {
			return err
		}
		run, err := wr.c.Runner.Follow(r.Context(), sr.Tenant, sr.ThreadID, sr.Seq)
		if err != nil {
			return err
		}
		return wr.c.Encode(resumed(w, rec.Head, after), run)
	}
	resp, err := wr.current(r.Context(), sr, rec)
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, resp)
}

// startingAfter reads a resumed stream's ?starting_after= (-1: none, send
// every event).
func startingAfter(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("starting_after")
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, apierror.Invalid("starting_after", "`starting_after` must be a sequence number (an integer ≥ 0).")
	}
	return n, nil
}

// resumed is the writer of a response's events streamed again: head's,
// numbered from 0, those numbered after after only.
func resumed(w http.ResponseWriter, head Response, after int64) wire.Encoder {
	sw := sse.NewBuffered(w)
	// The headers go now: with after at or past the last event there may
	// be nothing to send until the response ends (or never, for a finished
	// one, whose stream then ends empty).
	_ = sw.Start() // a client gone fails the first write, which ends Encode
	return &stream{fold: newFold(head, sw.Event, after), sw: sw, w: w}
}

var _ wire.RunStreamer = (*Wire)(nil)

// StreamFormat is "responses": Responses stream events, response.created
// to response.completed, each with its sequence_number.
func (*Wire) StreamFormat() string { return "responses" }

// Snapshots: a Responses client folds the events into its response.
func (*Wire) Snapshots() bool { return false }

// RunEncoder streams a turn again as the response it made: the stored
// response of a Responses turn (its id and request fields), else a
// response named after the run, of the thread's agent, in the thread's
// conversation. ?starting_after=N sends the events numbered after N only,
// as GET /v1/responses/{id}?stream=true does.
func (wr *Wire) RunEncoder(w http.ResponseWriter, r *http.Request, rs wire.RunStream) (wire.Encoder, error) {
	after, err := startingAfter(r)
	if err != nil {
		return nil, err
	}
	head := wr.head(&Request{Model: rs.Agent})
	head.ID, head.Conversation, head.Store = "resp_"+rs.RunID, &Conversation{ID: rs.ThreadID}, true
	sr, err := wr.c.Store.NextResponse(r.Context(), rs.Tenant, rs.ThreadID, rs.TurnSeq-1)
	switch {
	case err == nil && sr.Seq == rs.TurnSeq:
		rec, err := recordOf(sr)
		if err != nil {
			return nil, err
		}
		head = rec.Head
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return resumed(w, head, after), nil
}

// wantsStream reads whether a GET asks for the response's events: the
// query's stream=true, or {"stream": true} in a body (what openai-go's
// GetStreaming sends).
func wantsStream(r *http.Request) (bool, error) {
	if v := r.URL.Query().Get("stream"); v != "" {
		return v == "true", nil
	}
	body, err := httpjson.ReadBody(r)
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		return false, err
	}
	var b struct {
		Stream bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return false, apierror.Invalid("stream", "The request body is not valid JSON: %v", httpjson.Problem(err))
	}
	return b.Stream, nil
}

// current folds a stored response's events, from its turn's first to the
// next response's, into the response as it stands now.
func (wr *Wire) current(ctx context.Context, sr *store.Response, rec record) (*Response, error) {
	end := int64(-1)
	if next, err := wr.c.Store.NextResponse(ctx, sr.Tenant, sr.ThreadID, sr.Seq); err == nil {
		end = next.Seq
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	f := newFold(rec.Head, nil, -1)
	for e, err := range wr.c.Runner.Replay(ctx, sr.Tenant, sr.ThreadID, sr.Seq, max(end, 0)) {
		if err != nil {
			return nil, err
		}
		_ = f.Write(e)
	}
	resp := f.snapshot()
	// A cancelled response reads cancelled once its run has stopped: the
	// run's end (a RunError, code cancelled) says so. A response cancelled
	// before its run began never runs.
	switch {
	case sr.Cancelled && !f.started:
		resp.Status = StatusCancelled
	case !f.started:
		resp.Status = StatusQueued
	}
	return &resp, nil
}

// delete deletes a stored response (its conversation keeps its messages).
// A response still running (a background one, or one whose client still
// reads it) is cancelled first, as POST …/cancel does: a deleted response
// no longer runs, so its conversation takes new turns at once instead of
// being busy with a run nobody can name any more.
func (wr *Wire) delete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	sr, rec, err := wr.load(r)
	if err != nil {
		return err
	}
	resp, err := wr.current(r.Context(), sr, rec)
	if err != nil {
		return err
	}
	if resp.Status == StatusInProgress || resp.Status == StatusQueued {
		if err := wr.c.Store.CancelResponse(r.Context(), sr.Tenant, sr.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if _, err := wr.stop(r.Context(), sr); err != nil {
			return err
		}
	}
	err = wr.c.Store.DeleteResponse(r.Context(), sr.Tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(id)
	}
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
}

// cancel stops a response that is still running, background or not: its
// run is cancelled wherever it runs (a stream its client still reads then
// ends with the response cancelled) and the response is answered as it
// stands once the run has stopped. A response that is over is answered as
// it is.
func (wr *Wire) cancel(w http.ResponseWriter, r *http.Request) error {
	sr, rec, err := wr.load(r)
	if err != nil {
		return err
	}
	resp, err := wr.current(r.Context(), sr, rec)
	if err != nil {
		return err
	}
	if resp.Status == StatusInProgress || resp.Status == StatusQueued {
		if err := wr.c.Store.CancelResponse(r.Context(), sr.Tenant, sr.ID); err != nil {
			return err
		}
		if _, err := wr.stop(r.Context(), sr); err != nil {
			return err
		}
		sr.Cancelled = true
		if resp, err = wr.current(r.Context(), sr, rec); err != nil {
			return err
		}
	}
	return httpjson.Write(w, http.StatusOK, resp)
}

// stop cancels the run of a stored response's thread, wherever it runs,
// and waits (Runner.Stop) until it has stopped: one that does not stop in
// time is answered in progress, and reads cancelled once it has stopped.
func (wr *Wire) stop(ctx context.Context, sr *store.Response) (bool, error) {
	return wr.c.Runner.Stop(ctx, sr.Tenant, sr.ThreadID)
}

// inputItems lists a stored response's input items: newest first unless
// order=asc, limit 1–100 (20), after an item id.
func (wr *Wire) inputItems(w http.ResponseWriter, r *http.Request) error {
	_, rec, err := wr.load(r)
	if err != nil {
		return err
	}
	return writePage(w, r, rec.Input, "No input item of this response has id %q.")
}
