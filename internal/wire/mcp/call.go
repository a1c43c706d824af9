package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/stackbone/stackbone/internal/telemetry"
	"slices"
	"strings"
	"sync"

	"github.com/stackbone/stackbone/internal/wire"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// args is a tool call's input.
type args struct {
	Message string `json:"message"`
	Session string `json:"session,omitempty"`
}

// pauseState is the request state of an input-required result (the
// stateless protocol's elicitation): what the client's next attempt of the
// same call needs to go on. The client could alter it, but every step it
// leads to is one the caller's key may take anyway (decide a decision of
// its tenant, read its thread).
type pauseState struct {
	Thread string `json:"thread"`
	// Seq is the stored terminal event of the pause.
	Seq int64 `json:"seq"`
	// IDs are the decisions asked.
	IDs []string `json:"ids"`
	// Text is the turn's answer text before the pause.
	Text string `json:"text,omitempty"`
	// Earlier: the pause is an earlier call's turn; this call's message is
	// sent once it ends.
	Earlier bool `json:"earlier,omitempty"`
}

func (s pauseState) encode() string {
	b, _ := json.Marshal(s)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeState(s string) (pauseState, error) {
	var st pauseState
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil || st.Thread == "" || st.Seq <= 0 {
		return st, errors.New("the requestState of this call is not one this server issued")
	}
	return st, nil
}

// call is one tools/call.
type call struct {
	h      *Handler
	req    *sdk.CallToolRequest
	caller Caller
	base   string
	agent  string
	args   args
	prog   progress
	// marked is the session's waiting pause (store.RunControl.WaitingSeq)
	// this call read or recorded; 0: none.
	marked int64
}

// call runs a turn of the agent the tool is named after. Problems are
// results with isError (for the model to read), not protocol errors.
func (h *Handler) call(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	// A client's trace context comes in the call's _meta (MCP's
	// traceparent and tracestate), else in the request's headers.
	ctx = telemetry.ExtractMeta(ctx, req.Params.Meta)
	c, base := caller(req)
	if c.Tenant == "" {
		return nil, errors.New("mcp: the call carries no authenticated caller")
	}
	if c.CannotTurn != nil {
		return errorResult("", c.CannotTurn), nil
	}
	t := &call{h: h, req: req, caller: c, base: base, agent: req.Params.Name,
		prog: progress{token: req.Params.GetProgressToken(), session: req.Session}}
	if err := t.parse(); err != nil {
		return errorResult("", err), nil
	}
	if req.Params.RequestState != "" {
		return t.retry(ctx), nil
	}
	return t.fresh(ctx), nil
}

func (t *call) parse() error {
	raw := bytes.TrimSpace(t.req.Params.Arguments)
	if len(raw) == 0 || string(raw) == "null" {
		return apierror.Invalid("message", "The call needs arguments: {\"message\": \"…\"}.")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t.args); err != nil {
		return apierror.Invalid("arguments", "The arguments are not valid: %v (expected {\"message\": string, \"session\"?: string}).", err)
	}
	if strings.TrimSpace(t.args.Message) == "" {
		return apierror.Invalid("message", "`message` is required: what to ask the agent.")
	}
	if t.args.Session != "" {
		if err := apierror.CheckID("session", t.args.Session); err != nil {
			return err
		}
	}
	return nil
}

// fresh is a first attempt: on a session, an earlier call's turn that
// waited on a decision is settled (reported, or asked about) first; then
// the message is sent.
//
// The engine tells whether the session waits on a decision, or holds a
// turn's outcome a call told its client waits on one and no call reported
// yet (Start refuses the turn with store.ErrApprovalPending or
// engine.UnreportedPauseError, before it stores anything): only then is
// the earlier turn looked at.
func (t *call) fresh(ctx context.Context) *sdk.CallToolResult {
	res, text, err := t.turn(ctx)
	var up *engine.UnreportedPauseError
	if isUp := errors.As(err, &up); !isUp && !errors.Is(err, store.ErrApprovalPending) {
		if err != nil {
			return errorResult("", err)
		}
		return t.finish(res, text, nil)
	}
	var seq int64
	if up != nil {
		t.marked = up.Seq
		if !up.Pending {
			seq = up.Seq
		}
	}
	res, prior, ok := t.earlier(ctx, seq)
	if res != nil {
		return res
	}
	var earlier *string
	if ok {
		earlier = &prior
	}
	res, text, err = t.turn(ctx)
	if err != nil {
		return errorResult("", err)
	}
	return t.finish(res, text, earlier)
}

// retry is the stateless protocol's next attempt of a call that asked
// for decisions: record the client's answers, then go on as the first
// attempt would have.
func (t *call) retry(ctx context.Context) *sdk.CallToolResult {
	st, err := decodeState(t.req.Params.RequestState)
	if err == nil && st.Thread != t.args.Session {
		err = errors.New("the requestState belongs to another session")
	}
	if err != nil {
		return errorResult("", apierror.Invalid("requestState", "%v", err))
	}
	// The call that asked recorded the pause (remember): this one clears
	// it once it reports the turn's end.
	t.marked = st.Seq
	answers := map[string]*sdk.ElicitResult{}
	for id, r := range t.req.Params.InputResponses {
		if er, ok := r.(*sdk.ElicitResult); ok {
			answers[id] = er
		}
	}
	pending, err := t.pending(ctx)
	if err != nil {
		return errorResult(st.Text, err)
	}
	var asked, others []store.Interrupt
	for _, it := range pending {
		if slices.Contains(st.IDs, it.ID) {
			asked = append(asked, it)
		} else {
			others = append(others, it)
		}
	}
	res, run := t.apply(ctx, st, asked, others, answers)
	if res == nil {
		res, st.Text = t.settle(ctx, run, st)
	}
	if !st.Earlier {
		return t.finish(res, st.Text, nil)
	}
	res, earlier, ok := reported(res, st.Text)
	if !ok {
		return res
	}
	res, text, err := t.turn(ctx)
	if err != nil {
		return errorResult("", err)
	}
	return t.finish(res, text, &earlier)
}

// finish builds the call's result: the answer (unless res already is the
// result), after the outcome of an earlier call's turn when there is one.
func (t *call) finish(res *sdk.CallToolResult, text string, earlier *string) *sdk.CallToolResult {
	if res == nil {
		res = &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}
	}
	if earlier != nil && res.InputRequests == nil {
		head := &sdk.TextContent{Text: "Outcome of the earlier request on this session, which waited on a human decision:\n\n" + *earlier}
		res.Content = append([]sdk.Content{head}, res.Content...)
	}
	return res
}

// turn sends the call's message to the agent and follows the turn to its
// end, through pauses. err is the engine's refusal to start the turn.
func (t *call) turn(ctx context.Context) (*sdk.CallToolResult, string, error) {
	in := engine.Input{Tenant: t.caller.Tenant, Agent: t.agent, ThreadID: t.args.Session, DecidedBy: t.caller.Name, Key: t.caller.Name, Reports: t.args.Session != "",
		User: t.caller.User, AnyOwner: t.caller.AnyOwner, Messages: []message.Message{{Role: message.User, Content: t.args.Message}}}
	if t.canRelay() {
		in.Ask = t.relay
	}
	run, err := t.h.c.Runner.Start(ctx, in)
	if err != nil {
		return nil, "", err
	}
	res, text := t.settle(ctx, run, pauseState{Thread: t.args.Session})
	return res, text, nil
}

// earlier settles what an earlier call left on the session: pending
// decisions are asked about (or reported as still waiting), and the
// outcome of a turn a call answered with "waiting" (paused at seq, when
// not 0) is reported once. ok says there was such a turn and text is its
// answer.
func (t *call) earlier(ctx context.Context, seq int64) (res *sdk.CallToolResult, text string, ok bool) {
	if seq > 0 {
		run, err := t.h.c.Runner.Follow(ctx, t.caller.Tenant, t.args.Session, seq+1)
		if err != nil {
			return errorResult("", err), "", false
		}
		return reported(t.settle(ctx, run, pauseState{Thread: t.args.Session, Earlier: true}))
	}
	p, err := t.h.c.Runner.Paused(ctx, t.caller.Tenant, t.args.Session, t.agent)
	if err != nil {
		return errorResult("", err), "", false
	}
	if p == nil {
		return nil, "", false // a new session, or another agent's (the turn refuses it)
	}
	if len(p.Decisions) > 0 {
		st := pauseState{Thread: t.args.Session, Seq: p.Seq, Earlier: true}
		res, run := t.ask(ctx, st, p.Decisions)
		if res != nil {
			return res, "", false
		}
		return reported(t.settle(ctx, run, st))
	}
	return nil, "", false
}

// reported is an earlier turn's end as settle gives it, for the call that
// reports it: a failure is its outcome too (the call's own message is
// still sent), while a result that waits or asks ends the call.
func reported(res *sdk.CallToolResult, text string) (*sdk.CallToolResult, string, bool) {
	switch {
	case res == nil:
		return nil, text, true
	case res.IsError:
		return nil, contentText(res), true
	}
	return res, "", false
}

// contentText is a result's text content.
func contentText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// settle reads a run to its end. A pause asks the client for the decisions
// when it can answer (and goes on with the resumed run), else it ends the
// call with a result that says what it waits for. res is nil when the turn
// completed, with its answer text.
func (t *call) settle(ctx context.Context, run *engine.Run, st pauseState) (res *sdk.CallToolResult, text string) {
	text = st.Text
	for {
		out, more, err := t.consume(ctx, run)
		text = join(text, more)
		if err != nil {
			t.forget(ctx)
			return errorResult(text, err), ""
		}
		if out == nil || out.Type != event.Interrupt || t.args.Session == "" {
			t.forget(ctx)
			return nil, text
		}
		// The engine gives the pause: its stored terminal event and the
		// decisions it waits on.
		p, err := run.Pause(ctx)
		if err == nil && p == nil {
			err = fmt.Errorf("mcp: thread %q has no stored pause", t.args.Session)
		}
		if err != nil {
			return errorResult(text, err), ""
		}
		st.Seq, st.Text = p.Seq, text
		if res, run = t.ask(ctx, st, p.Decisions); res != nil {
			if !res.IsError {
				// The call ends telling its client the turn waits on a
				// human (or asking the client, which may never come
				// back): the next call on the session, through any
				// replica, reports the turn's outcome.
				if err := t.remember(ctx, p.Seq); err != nil {
					return errorResult(text, err), ""
				}
			}
			return res, ""
		}
	}
}

// consume reads a run's events until its terminal one, reporting progress;
// it returns the outcome and the agent's own text (subagents' text stays
// inside the turn). When ctx ends first (the client cancelled) the run is
// stopped: a stateless one with the request, a durable one with Cancel.
func (t *call) consume(ctx context.Context, run *engine.Run) (*event.Outcome, string, error) {
	var (
		b      strings.Builder
		j      wire.TextJoiner
		out    *event.Outcome
		runErr error
	)
	events := make(chan event.Event)
	stop := make(chan struct{})
	defer close(stop)
	if t.h.c.KeepAlive != nil {
		defer t.h.c.KeepAlive(func() { t.prog.working(ctx) })()
	}
	go func() {
		defer close(events)
		for e := range run.Events() {
			select {
			case events <- e:
			case <-stop:
				return
			}
		}
	}()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				if out == nil && runErr == nil {
					runErr = apierror.IncompleteRun()
				}
				return out, b.String(), runErr
			}
			t.prog.event(ctx, e)
			if e.SubagentRunID != "" {
				continue
			}
			switch e.Type {
			case event.TextDelta:
				b.WriteString(j.Piece(e))
			case event.RunFinished:
				out = e.Outcome
				if out == nil {
					out = &event.Outcome{Type: event.Success}
				}
			case event.RunError:
				runErr = apierror.OfRunError(e)
			}
		case <-ctx.Done():
			if t.args.Session != "" {
				_ = t.h.c.Runner.Cancel(context.WithoutCancel(ctx), t.caller.Tenant, t.args.Session)
			}
			return nil, b.String(), errCancelled()
		}
	}
}

// pending lists the session's pending decisions.
func (t *call) pending(ctx context.Context) ([]store.Interrupt, error) {
	return t.h.c.Store.ListInterrupts(ctx, t.caller.Tenant, store.InterruptFilter{ThreadID: t.args.Session,
		Status: store.Pending, Limit: store.MaxLimit})
}

// remember records, in the store, that the session's turn paused at seq
// and the call told its client so: the next call on the session, through
// any replica, reports the turn's outcome (engine.UnreportedPauseError).
func (t *call) remember(ctx context.Context, seq int64) error {
	if t.marked == seq {
		return nil
	}
	if err := t.h.c.Store.SetWaiting(context.WithoutCancel(ctx), t.caller.Tenant, t.args.Session, seq); err != nil {
		return err
	}
	t.marked = seq
	return nil
}

// forget: the session's turn ended and this call reports it. Only the
// pause this call knows of is cleared (a later one recorded meanwhile by
// another call stays for its next call); a call that knows of none writes
// nothing.
func (t *call) forget(ctx context.Context) {
	if t.args.Session == "" || t.marked == 0 {
		return
	}
	if _, err := t.h.c.Store.ClearWaiting(context.WithoutCancel(ctx), t.caller.Tenant, t.args.Session, t.marked); err != nil {
		t.h.c.Logger.Warn("mcp: clear the session's waiting pause; its next call reports the outcome again", "session", t.args.Session, "err", err)
	}
	t.marked = 0
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}

// errorResult is a failed call: the answer text so far, then the error's
// public message and code.
func errorResult(text string, err error) *sdk.CallToolResult {
	e := apierror.From(err)
	msg := fmt.Sprintf("Error (%s): %s", e.Code, e.Message)
	var content []sdk.Content
	if text != "" {
		content = append(content, &sdk.TextContent{Text: text})
	}
	content = append(content, &sdk.TextContent{Text: msg})
	return &sdk.CallToolResult{Content: content, IsError: true,
		StructuredContent: map[string]any{"error": map[string]any{"code": e.Code, "message": e.Message}}}
}

// progress sends progress notifications when the client asked for them
// (a progressToken): one per tool call, tool result, subagent and pause,
// and one at each keepalive while the turn runs (working). It is safe for
// concurrent use.
type progress struct {
	token   any
	session *sdk.ServerSession
	mu      sync.Mutex
	n       float64
}

// working is the keepalive's notification.
func (p *progress) working(ctx context.Context) { p.send(ctx, "Working") }

func (p *progress) event(ctx context.Context, e event.Event) {
	var msg string
	switch e.Type {
	case event.ToolCallStart:
		msg = "Calling " + e.ToolName
	case event.ToolResult:
		msg = e.ToolName + " returned"
		if e.IsError {
			msg = e.ToolName + " failed"
		}
	case event.SubagentStarted:
		msg = "Subagent " + e.Subagent + " started"
	case event.RunFinished:
		msg, _ = event.WaitingNote(e.Outcome)
	}
	if msg != "" {
		p.send(ctx, msg)
	}
}

func (p *progress) send(ctx context.Context, msg string) {
	if p.token == nil || p.session == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	_ = p.session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg})
}
