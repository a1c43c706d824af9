package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// ViaMCP is the decidedVia of a decision a client made through elicitation.
const ViaMCP = "mcp"

// canElicit reports whether the client answers form elicitations. A key
// whose role cannot decide is never asked: its decisions stay pending for
// an approver.
func (t *call) canElicit() bool {
	if t.caller.CannotDecide != nil {
		return false
	}
	caps := t.req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	// An empty elicitation capability means form (before 2025-11-25).
	return caps.Elicitation.Form != nil || caps.Elicitation.URL == nil
}

// errNotAnswered is a relayed question the client cancelled: it waits as a
// pending decision instead (durable turns).
var errNotAnswered = errors.New("mcp: the client cancelled the question")

// canRelay reports whether the questions the agent's tools ask (an MCP
// server's elicitation, reached through the agent) can be put to this
// client in the middle of the call: a session-based client that answers
// form elicitations. The stateless revision asks only in a call's result,
// which a tool's question in the middle of the turn cannot wait for.
func (t *call) canRelay() bool {
	return t.canElicit() && t.req.ProtocolVersion() < newProtocol && t.req.Session != nil
}

// relay asks the client a question a tool of the agent asks, as a form
// elicitation with the tool's own message and schema. Declining declines;
// cancelling (or a failed request) is an error: the engine then leaves the
// question pending on a durable turn.
func (t *call) relay(ctx context.Context, toolName string, q tool.Question) (tool.Answer, error) {
	var schema map[string]any
	if err := json.Unmarshal(q.Schema, &schema); err != nil || schema == nil {
		schema = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	msg := fmt.Sprintf("The agent %s's tool %s asks: %s", t.agent, toolName, q.Message)
	r, err := t.req.Session.Elicit(ctx, &sdk.ElicitParams{Mode: "form", Message: msg, RequestedSchema: schema})
	if err != nil {
		return tool.Answer{}, fmt.Errorf("mcp: relay a question to the client: %w", err)
	}
	switch r.Action {
	case "accept":
		content, err := json.Marshal(r.Content)
		if err != nil || r.Content == nil {
			content = json.RawMessage(`{}`)
		}
		return tool.Answer{Accepted: true, Content: content}, nil
	case "decline":
		return tool.Answer{Message: "Declined in the MCP client."}, nil
	}
	return tool.Answer{}, errNotAnswered
}

// ask asks the client for the pending decisions of a pause. A client that
// cannot answer gets a result that says what the call waits for. On the
// stateless protocol the questions are the call's result (input required)
// and the client's next attempt brings the answers (retry); a session-based
// client is asked in the middle of the call. When every decision is made,
// run is the resumed turn.
func (t *call) ask(ctx context.Context, st pauseState, pending []store.Interrupt) (res *sdk.CallToolResult, run *engine.Run) {
	if len(pending) == 0 {
		return t.resume(ctx, st)
	}
	if !t.canElicit() {
		return t.waiting(st, pending, nil), nil
	}
	if t.req.ProtocolVersion() >= newProtocol {
		st.IDs = nil
		reqs := sdk.InputRequestMap{}
		for _, it := range pending {
			st.IDs = append(st.IDs, it.ID)
			reqs[it.ID] = t.form(it)
		}
		return &sdk.CallToolResult{InputRequests: reqs, RequestState: st.encode()}, nil
	}
	answers := map[string]*sdk.ElicitResult{}
	for _, it := range pending {
		r, err := t.req.Session.Elicit(ctx, t.form(it))
		if err != nil {
			if ctx.Err() != nil {
				return errorResult(st.Text, errCancelled()), nil
			}
			t.h.c.Logger.Info("mcp: elicitation failed; the decision stays pending", "interrupt", it.ID, "err", err)
			continue
		}
		answers[it.ID] = r
	}
	return t.apply(ctx, st, pending, nil, answers)
}

// apply records the client's answers to a pause's decisions. A declined
// form rejects the call (skips an in-doubt one); a cancelled one, or none,
// leaves the decision pending for Studio, the CLI or the HTTP API.
func (t *call) apply(ctx context.Context, st pauseState, asked, others []store.Interrupt, answers map[string]*sdk.ElicitResult) (*sdk.CallToolResult, *engine.Run) {
	var notes []string
	// left are the pause's decisions still pending once the answers are
	// recorded: those asked and not decided here (or by another decider
	// first), and the pause's others.
	var left []store.Interrupt
	for _, it := range asked {
		d, ok, err := decisionOf(it, answers[it.ID])
		decided := false
		if err == nil && ok && t.caller.CannotDecide != nil {
			err = t.caller.CannotDecide
		} else if err == nil && ok {
			d.Via, d.By, d.ClaimedVia = ViaMCP, t.caller.Name, t.clientName()
			_, err = t.h.c.Runner.Decide(ctx, t.caller.Tenant, it.ID, d)
			if errors.Is(err, store.ErrAlreadyDecided) {
				err = nil
			}
			decided = err == nil
		}
		if err != nil {
			notes = append(notes, fmt.Sprintf("The answer to decision %s was not recorded: %s", it.ID, apierror.From(err).Message))
		}
		if !decided {
			left = append(left, it)
		}
	}
	left = append(left, others...)
	if len(left) > 0 {
		return t.waiting(st, left, notes), nil
	}
	return t.resume(ctx, st)
}

// resume follows the session's run on from the pause (every decision is
// made: the run resumed, or already ended).
func (t *call) resume(ctx context.Context, st pauseState) (*sdk.CallToolResult, *engine.Run) {
	run, err := t.h.c.Runner.Follow(ctx, t.caller.Tenant, t.args.Session, st.Seq+1)
	if err != nil {
		return errorResult(st.Text, err), nil
	}
	return nil, run
}

// clientName is the client's own name for the audit's claimedVia, when it
// is a short plain name.
func (t *call) clientName() string {
	ci := t.req.ClientInfo()
	if ci == nil || len(ci.Name) > 32 || strings.IndexFunc(ci.Name, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}) >= 0 {
		return ""
	}
	return ci.Name
}

// form is the elicitation for one pending decision: the form the
// decision offers (decision.FormFor).
func (t *call) form(it store.Interrupt) *sdk.ElicitParams {
	f := decision.FormFor(t.agent, &it)
	return &sdk.ElicitParams{Mode: "form", Message: f.Message, RequestedSchema: f.Schema}
}

// declinedMessage is the message of a decision declined in the client.
const declinedMessage = "Declined in the MCP client."

// decisionOf reads a form's answer. ok is false when the answer decides
// nothing (cancelled, or no answer).
func decisionOf(it store.Interrupt, r *sdk.ElicitResult) (d engine.Decision, ok bool, err error) {
	if r == nil {
		return d, false, nil
	}
	switch r.Action {
	case "decline":
		d, ok = decision.Decline(&it, declinedMessage)
		return d, ok, nil
	case "accept":
	default:
		return d, false, nil
	}
	// A *decision.Error; apierror maps it to a 400 naming its field.
	return decision.FromForm(&it, r.Content)
}

// waiting is the result of a call that waits on human decisions: what
// they are, how to decide them, and that the next call on the session
// reports the outcome.
func (t *call) waiting(st pauseState, pending []store.Interrupt, notes []string) *sdk.CallToolResult {
	var b strings.Builder
	if st.Earlier {
		b.WriteString("Your message was not sent: this session is still waiting on a human decision about its earlier request.\n\n")
	}
	if st.Text != "" {
		b.WriteString(st.Text + "\n\n")
	}
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	studio := t.base + "/studio/"
	var decisions []map[string]any
	for _, it := range pending {
		fmt.Fprintf(&b, "Waiting on a human decision: %s (decision %s).\n", decision.Describe(&it), it.ID)
		b.WriteString("Decide it in Stackbone Studio (" + studio + ") or with the CLI:\n")
		for _, d := range it.AllowedDecisions {
			if d == string(tool.Edit) {
				fmt.Fprintf(&b, "  stackbone hitl approve %s --args '{…}' --yes\n", it.ID)
				continue
			}
			fmt.Fprintf(&b, "  stackbone hitl %s %s --yes\n", d, it.ID)
		}
		decisions = append(decisions, map[string]any{"id": it.ID, "tool": it.Tool, "description": it.Description,
			"allowedDecisions": it.AllowedDecisions, "reason": it.Reason})
	}
	fmt.Fprintf(&b, "Then call %s again with session %q: the call reports the outcome.", t.agent, t.args.Session)
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: b.String()}},
		StructuredContent: map[string]any{"status": "waiting_for_decision", "session": t.args.Session, "decisions": decisions, "studio": studio}}
}

// errCancelled is the error of a call its client cancelled.
func errCancelled() error {
	return apierror.New(apierror.InvalidRequest, engine.CodeCancelled, "The call was cancelled.")
}
