package decision_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

var refundParams = json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"},"amount":{"type":"number"}},"required":["orderId","amount"]}`)

func refundTool(allowed ...tool.Decision) *tool.Tool {
	return &tool.Tool{Name: "refund", Parameters: refundParams, Approval: &tool.Approval{AllowedDecisions: allowed}}
}

func approval(t *tool.Tool) *store.Interrupt {
	it := &store.Interrupt{ID: "int_a", Tenant: "acme", Tool: t.Name, Args: json.RawMessage(`{"orderId":"o1","amount":5}`),
		Status: store.Pending, CreatedAt: t0}
	decision.NewApproval(t, t0, 0).Apply(it)
	return it
}

func inDoubt() *store.Interrupt {
	it := &store.Interrupt{ID: "int_d", Tenant: "acme", Tool: "refund", Args: json.RawMessage(`{"orderId":"o1","amount":5}`),
		Status: store.Pending, CreatedAt: t0}
	decision.NewInDoubt().Apply(it)
	return it
}

func elicitation(q json.RawMessage) *store.Interrupt {
	it := &store.Interrupt{ID: "int_e", Tenant: "acme", Tool: "ask", Args: json.RawMessage(`{}`), Description: "Which city?",
		Status: store.Pending, CreatedAt: t0}
	decision.NewElicitation(q).Apply(it)
	return it
}

func decidedAs(it *store.Interrupt, st store.InterruptStatus, d store.Decision) *store.Interrupt {
	c := *it
	c.Status, c.Decision = st, &d
	return &c
}

func TestRegistry(t *testing.T) {
	for _, k := range []decision.Kind{decision.Approval, decision.Elicitation, decision.InDoubt} {
		if !slices.Contains(decision.Kinds(), k) {
			t.Fatalf("kind %s is not registered: %v", k, decision.Kinds())
		}
	}
	if decision.Of("").Kind != decision.Approval || decision.Of("no_such").Kind != decision.Approval {
		t.Fatal("an empty or unknown reason is an approval")
	}
	for _, k := range decision.Kinds() {
		def, ok := decision.Lookup(k)
		if !ok || def.Kind != k {
			t.Fatalf("lookup %s", k)
		}
	}
	if d := decision.Of(store.ReasonInDoubt); !d.Verdict || !d.Gate || !d.Named || d.Hint == "" {
		t.Fatalf("in doubt: %+v", d)
	}
	if d := decision.Of(store.ReasonElicitation); d.Gate || !d.Named || d.Verdict {
		t.Fatalf("elicitation: %+v", d)
	}
	if d := decision.Of(store.ReasonApproval); !d.Gate || d.Named || d.Verdict {
		t.Fatalf("approval: %+v", d)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a kind twice must panic")
		}
	}()
	decision.Register(&decision.Def{Kind: decision.Approval, Choices: []decision.Choice{tool.Approve},
		Result: decision.Result, Cancel: decision.Cancel, Heading: func(string, string, *store.Interrupt) string { return "" }})
}

func TestRegisterPlugsInAKind(t *testing.T) {
	k := decision.Kind("input_required_test")
	if _, ok := decision.Lookup(k); ok {
		return // registered by an earlier -count run
	}
	decision.Register(&decision.Def{Kind: k, Choices: []decision.Choice{tool.Approve, tool.Reject}, Named: true,
		Cancel:  func(*store.Interrupt) decision.Answer { return decision.Answer{Message: "cancelled"} },
		Heading: func(agent, what string, _ *store.Interrupt) string { return agent + " needs input: " + what },
		Result:  func(*store.Interrupt) decision.Outcome { return decision.Outcome{Pending: true} }})
	it := &store.Interrupt{ID: "int_x", Reason: string(k), Tool: "t", Args: json.RawMessage(`{}`), AllowedDecisions: []string{"approve", "reject"}}
	if decision.For(it).Kind != k || !decision.Result(it).Pending || decision.Cancel(it).Message != "cancelled" {
		t.Fatal("a registered kind answers for its interrupts")
	}
	if q := decision.Question("bot", it); !strings.HasPrefix(q, "bot needs input: a call to t\n") {
		t.Fatalf("question %q", q)
	}
}

func TestApprovalOffer(t *testing.T) {
	it := approval(refundTool())
	if it.Reason != store.ReasonApproval || !slices.Equal(it.AllowedDecisions, []string{"approve", "reject"}) || it.ApprovalsNeeded != 1 || it.ExpiresAt != nil {
		t.Fatalf("offer %+v", it)
	}
	if string(it.ResponseSchema) != `{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}` {
		t.Fatalf("schema %s", it.ResponseSchema)
	}
	edit := refundTool(tool.Approve, tool.Edit)
	edit.Approval.Approvals, edit.Approval.ExpiresAfter = 2, time.Minute
	it = approval(edit)
	if it.ApprovalsNeeded != 2 || it.ExpiresAt == nil || !it.ExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("quorum and expiry: %+v", it)
	}
	if !strings.Contains(string(it.ResponseSchema), `"editedArgs":`+string(refundParams)) {
		t.Fatalf("an editable approval's form carries the tool's parameters: %s", it.ResponseSchema)
	}
	// The server's default expiry applies when the rule names none.
	o := decision.NewApproval(refundTool(), t0, time.Hour)
	if o.ExpiresAt == nil || !o.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatal("default TTL")
	}
}

func TestApprovalValidate(t *testing.T) {
	it := approval(refundTool(tool.Approve, tool.Reject, tool.Edit))
	a := decision.Answer{Kind: tool.Approve}
	if err := decision.Validate(it, &a, refundParams); err != nil || !a.Approved {
		t.Fatalf("approve: %v %+v", err, a)
	}
	a = decision.Answer{Kind: tool.Reject, EditedArgs: json.RawMessage(`{"x":1}`)}
	if err := decision.Validate(it, &a, refundParams); err != nil || a.Approved || a.EditedArgs != nil {
		t.Fatalf("reject drops edits: %v %+v", err, a)
	}
	a = decision.Answer{EditedArgs: json.RawMessage(`{"orderId":"o1","amount":3}`)}
	if err := decision.Validate(it, &a, refundParams); err != nil || !a.Approved {
		t.Fatalf("edit: %v %+v", err, a)
	}
	for name, c := range map[string]struct {
		it    *store.Interrupt
		a     decision.Answer
		field string
		msg   string
	}{
		"unknown":       {it, decision.Answer{Kind: "maybe"}, decision.FieldDecision, `Unknown decision "maybe".`},
		"bad edit":      {it, decision.Answer{EditedArgs: json.RawMessage(`{"orderId":1}`)}, decision.FieldEditedArgs, "editedArgs do not match the tool's parameter schema"},
		"retry":         {it, decision.Answer{Kind: tool.Retry}, decision.FieldDecision, `The decision "retry" is not allowed for this call (allowed: approve, reject, edit).`},
		"edit disallow": {approval(refundTool()), decision.Answer{Kind: tool.Edit, EditedArgs: json.RawMessage(`{}`)}, decision.FieldEditedArgs, "Editing the arguments is not allowed"},
		"no reject":     {approval(refundTool(tool.Approve)), decision.Answer{}, decision.FieldApproved, "Rejecting is not allowed for this decision."},
		"no approve":    {approval(refundTool(tool.Edit, tool.Reject)), decision.Answer{Approved: true}, decision.FieldApproved, "Approving without edits is not allowed for this decision."},
	} {
		a := c.a
		err := decision.Validate(c.it, &a, refundParams)
		var de *decision.Error
		if !errors.As(err, &de) || de.Field != c.field || !strings.Contains(de.Message, c.msg) {
			t.Errorf("%s: got %v (%+v), want %s: %s", name, err, de, c.field, c.msg)
		}
	}
	// A schema's problems come with the error.
	a = decision.Answer{EditedArgs: json.RawMessage(`{"orderId":1}`)}
	var de *decision.Error
	if err := decision.Validate(it, &a, refundParams); !errors.As(err, &de) || de.Problems == nil {
		t.Fatalf("problems: %v", err)
	}
}

func TestInDoubt(t *testing.T) {
	it := inDoubt()
	if it.Reason != store.ReasonInDoubt || !slices.Equal(it.AllowedDecisions, []string{"retry", "skip"}) || !strings.Contains(string(it.ResponseSchema), `"enum":["retry","skip"]`) {
		t.Fatalf("offer %+v", it)
	}
	a := decision.Answer{Kind: tool.Retry}
	if err := decision.Validate(it, &a, nil); err != nil || !a.Approved {
		t.Fatalf("retry approves: %v %+v", err, a)
	}
	a = decision.Answer{Kind: tool.Skip, Message: "it ran"}
	if err := decision.Validate(it, &a, nil); err != nil || a.Approved || a.StoredKind() != "skip" {
		t.Fatalf("skip rejects: %v %+v", err, a)
	}
	for _, a := range []decision.Answer{{Approved: true}, {}, {Kind: tool.Edit, EditedArgs: json.RawMessage(`{}`)}} {
		var de *decision.Error
		if err := decision.Validate(it, &a, nil); !errors.As(err, &de) || de.Field != decision.FieldDecision {
			t.Errorf("%+v: %v", a, err)
		}
	}
	a = decision.Answer{Kind: tool.Retry, EditedArgs: json.RawMessage(`{}`)}
	var de *decision.Error
	if err := decision.Validate(it, &a, nil); !errors.As(err, &de) || de.Field != decision.FieldEditedArgs {
		t.Fatalf("a retry with edits: %v", err)
	}
	if c := decision.Cancel(it); c.Kind != tool.Skip {
		t.Fatalf("cancel skips: %+v", c)
	}
	// Outcomes: pending, skipped (with and without a message), retried.
	if o := decision.Result(it); !o.Pending {
		t.Fatal("pending")
	}
	o := decision.Result(decidedAs(it, store.Rejected, store.Decision{Kind: "skip"}))
	if o.Run || !o.Skipped || o.Result != decision.SkippedResult || !o.IsError {
		t.Fatalf("skipped: %+v", o)
	}
	o = decision.Result(decidedAs(it, store.Rejected, store.Decision{Kind: "skip", Message: "it ran"}))
	if o.Result != "it ran" || o.IsError {
		t.Fatalf("skipped with a message: %+v", o)
	}
	o = decision.Result(decidedAs(it, store.Approved, store.Decision{Kind: "retry", Approved: true}))
	if !o.Run || string(o.Args) != string(it.Args) {
		t.Fatalf("retried: %+v", o)
	}
	if q := decision.Question("shop", it); !strings.Contains(q, "it may or may not have run") || !strings.Contains(q, "Decision id: int_d") {
		t.Fatalf("question %q", q)
	}
}

func TestElicitation(t *testing.T) {
	q := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	it := elicitation(q)
	if it.Reason != store.ReasonElicitation || !slices.Equal(it.AllowedDecisions, []string{"approve", "edit", "reject"}) {
		t.Fatalf("offer %+v", it)
	}
	if got := decision.AnswerSchema(it.ResponseSchema); string(got) != string(q) {
		t.Fatalf("answer schema %s", got)
	}
	if got := decision.AnswerSchema(elicitation(nil).ResponseSchema); string(got) != `{"type":"object"}` {
		t.Fatalf("no question schema: %s", got)
	}
	a := decision.Answer{EditedArgs: json.RawMessage(`{"city":"Paris"}`)}
	if err := decision.Validate(it, &a, refundParams); err != nil || !a.Approved {
		t.Fatalf("an answer follows the question's schema, not the tool's: %v", err)
	}
	a = decision.Answer{EditedArgs: json.RawMessage(`{"city":3}`)}
	var de *decision.Error
	if err := decision.Validate(it, &a, nil); !errors.As(err, &de) || !strings.Contains(de.Message, "the question's schema") {
		t.Fatalf("a wrong answer: %v", err)
	}
	if o := decision.Result(it); !o.Pending || o.Answer != nil {
		t.Fatal("pending")
	}
	o := decision.Result(decidedAs(it, store.Approved, store.Decision{Approved: true, EditedArgs: json.RawMessage(`{"city":"Paris"}`)}))
	if o.Answer == nil || !o.Answer.Accepted || string(o.Answer.Content) != `{"city":"Paris"}` {
		t.Fatalf("answered: %+v", o)
	}
	o = decision.Result(decidedAs(it, store.Approved, store.Decision{Approved: true}))
	if string(o.Answer.Content) != `{}` {
		t.Fatalf("answered empty: %+v", o.Answer)
	}
	o = decision.Result(decidedAs(it, store.Rejected, store.Decision{Message: "no"}))
	if o.Answer == nil || o.Answer.Accepted || o.Answer.Message != "no" {
		t.Fatalf("declined: %+v", o)
	}
	if c := decision.Cancel(it); c.Approved || c.Message != decision.MessageCancelled {
		t.Fatalf("cancel: %+v", c)
	}
}

func TestApprovalResult(t *testing.T) {
	it := approval(refundTool(tool.Approve, tool.Reject, tool.Edit))
	o := decision.Result(decidedAs(it, store.Rejected, store.Decision{Message: "too much"}))
	if o.Run || o.Result != "The user rejected this tool call. Reviewer's message: too much" || !o.IsError {
		t.Fatalf("rejected: %+v", o)
	}
	o = decision.Result(decidedAs(it, store.Rejected, store.Decision{Via: store.ViaExpiry}))
	if !o.Expired || o.Result != decision.ExpiredResult {
		t.Fatalf("expired: %+v", o)
	}
	o = decision.Result(decidedAs(it, store.Approved, store.Decision{Approved: true, EditedArgs: json.RawMessage(`{"amount":1}`)}))
	if !o.Run || string(o.Args) != `{"amount":1}` {
		t.Fatalf("edited: %+v", o)
	}
	o = decision.Result(decidedAs(it, store.Approved, store.Decision{Approved: true}))
	if !o.Run || o.Args != nil {
		t.Fatalf("approved: %+v", o)
	}
	if c := decision.Cancel(it); c.Approved || c.Message != decision.MessageCancelled {
		t.Fatalf("cancel: %+v", c)
	}
}

func TestFromPayload(t *testing.T) {
	it := approval(refundTool(tool.Approve, tool.Reject, tool.Edit))
	a, err := decision.FromPayload(it, json.RawMessage(`{"approved":true}`), refundParams)
	if err != nil || !a.Approved {
		t.Fatalf("approved: %v", err)
	}
	a, err = decision.FromPayload(it, json.RawMessage(`{"editedArgs":{"orderId":"o1","amount":2}}`), refundParams)
	if err != nil || !a.Approved || len(a.EditedArgs) == 0 {
		t.Fatalf("edited: %v %+v", err, a)
	}
	a, err = decision.FromPayload(it, json.RawMessage(`{"approved":false,"editedArgs":{"orderId":"o1","amount":2}}`), refundParams)
	if err != nil || a.Approved || a.EditedArgs != nil {
		t.Fatalf("rejected with edits: %v %+v", err, a)
	}
	for payload, want := range map[string]string{
		``:                 `needs a payload such as {"approved": true}`,
		`null`:             `needs a payload`,
		`{"approved":"y"}`: `does not match its responseSchema`,
		`{"approved":true,"editedArgs":{"orderId":5,"amount":1}}`: `/editedArgs/orderId`,
		`{"approved":true,"decision":"retry"}`:                    `The decision "retry" is not allowed`,
	} {
		_, err := decision.FromPayload(it, json.RawMessage(payload), refundParams)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", payload, err, want)
		}
	}
	if _, err := decision.FromPayload(inDoubt(), json.RawMessage(`{"decision":"skip","message":"done"}`), nil); err != nil {
		t.Fatal(err)
	}
}

func TestForm(t *testing.T) {
	it := approval(refundTool(tool.Approve, tool.Reject, tool.Edit))
	it.Description = "Refund o1 for 5"
	f := decision.FormFor("refunds", it)
	props := f.Schema["properties"].(map[string]any)
	if _, ok := props["arguments"]; !ok {
		t.Fatal("an editable decision's form has arguments")
	}
	if _, ok := props["message"]; !ok {
		t.Fatal("a rejectable decision's form has a message")
	}
	if !strings.HasPrefix(f.Message, "The agent refunds waits for your approval: Refund o1 for 5.\nTool: refund\n") {
		t.Fatalf("message %q", f.Message)
	}
	f = decision.FormFor("refunds", approval(refundTool(tool.Approve)))
	props = f.Schema["properties"].(map[string]any)
	if _, ok := props["arguments"]; ok {
		t.Fatal("no arguments without edit")
	}
	if _, ok := props["message"]; ok {
		t.Fatal("no message without reject or skip")
	}
	// Answers read from a form.
	a, ok, err := decision.FromForm(it, map[string]any{"decision": "edit", "arguments": `{"orderId":"o1","amount":1}`})
	if err != nil || !ok || a.Kind != tool.Edit || string(a.EditedArgs) != `{"orderId":"o1","amount":1}` {
		t.Fatalf("edit: %v %+v", err, a)
	}
	a, ok, _ = decision.FromForm(it, map[string]any{"decision": "reject", "message": "no"})
	if !ok || a.Kind != tool.Reject || a.Message != "no" {
		t.Fatalf("reject: %+v", a)
	}
	var de *decision.Error
	if _, _, err := decision.FromForm(it, map[string]any{"decision": "edit", "arguments": "{"}); !errors.As(err, &de) || de.Field != decision.FieldArguments {
		t.Fatalf("bad JSON: %v", err)
	}
	if _, _, err := decision.FromForm(it, map[string]any{"decision": "x"}); !errors.As(err, &de) || de.Field != decision.FieldDecision {
		t.Fatalf("unknown: %v", err)
	}
	// Declining skips what may have run, rejects what asks approval.
	if a, ok := decision.Decline(inDoubt(), "m"); !ok || a.Kind != tool.Skip {
		t.Fatalf("decline in doubt: %+v", a)
	}
	if a, ok := decision.Decline(it, "m"); !ok || a.Kind != tool.Reject || a.Message != "m" {
		t.Fatalf("decline approval: %+v", a)
	}
	if _, ok := decision.Decline(approval(refundTool(tool.Approve)), "m"); ok {
		t.Fatal("nothing to decline to")
	}
}

func TestMayDecide(t *testing.T) {
	it := approval(refundTool())
	approve := decision.Answer{Kind: tool.Approve}
	if err := decision.MayDecide(it, decision.Who{Tenant: "acme", By: "alice", Role: config.RoleApprover}, approve, t0); err != nil {
		t.Fatal(err)
	}
	// Roles.
	var re *decision.RoleError
	if err := decision.MayDecide(it, decision.Who{By: "bob", Role: config.RoleCaller}, approve, t0); !errors.As(err, &re) ||
		!strings.Contains(err.Error(), `role "caller", which cannot decide approvals`) {
		t.Fatalf("caller: %v", err)
	}
	for r, ok := range map[config.Role]bool{"": true, config.RoleAdmin: true, config.RoleApprover: true, config.RoleCaller: false} {
		if (decision.AllowRole(r) == nil) != ok {
			t.Errorf("role %q", r)
		}
	}
	// Tenant.
	if err := decision.MayDecide(it, decision.Who{Tenant: "other"}, approve, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("foreign: %v", err)
	}
	// Status.
	done := decidedAs(it, store.Approved, store.Decision{Approved: true})
	if err := decision.MayDecide(done, decision.Who{}, approve, t0); !errors.Is(err, store.ErrAlreadyDecided) {
		t.Fatalf("decided: %v", err)
	}
	// Expiry: recorded already, or pending past it.
	exp := t0.Add(time.Minute)
	pending := approval(refundTool())
	pending.ExpiresAt = &exp
	if err := decision.MayDecide(pending, decision.Who{}, approve, t0.Add(30*time.Second)); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	var ee *decision.ExpiredError
	if err := decision.MayDecide(pending, decision.Who{}, approve, exp); !errors.As(err, &ee) || !ee.Unrecorded || !errors.Is(err, store.ErrDecisionExpired) {
		t.Fatalf("past expiry: %v", err)
	}
	expired := decidedAs(pending, store.Rejected, store.Decision{Via: store.ViaExpiry})
	if err := decision.MayDecide(expired, decision.Who{}, approve, exp); !errors.As(err, &ee) || ee.Unrecorded || errors.Is(err, store.ErrAlreadyDecided) {
		t.Fatalf("expired: %v", err)
	}
	// Quorum: one approval per principal; an edit or a rejection is not counted as a repeat.
	q := approval(refundTool(tool.Approve, tool.Reject, tool.Edit))
	q.ApprovalsNeeded = 2
	q.Approvals = []store.Approval{{By: "alice", At: t0}}
	if err := decision.MayDecide(q, decision.Who{By: "alice"}, approve, t0); !errors.Is(err, store.ErrAlreadyApproved) {
		t.Fatalf("again: %v", err)
	}
	if err := decision.MayDecide(q, decision.Who{By: "alice"}, decision.Answer{Approved: true}, t0); !errors.Is(err, store.ErrAlreadyApproved) {
		t.Fatalf("again, as approved: %v", err)
	}
	for _, a := range []decision.Answer{{Kind: tool.Reject}, {}, {Kind: tool.Edit, EditedArgs: json.RawMessage(`{"amount":1}`)}} {
		if err := decision.MayDecide(q, decision.Who{By: "alice"}, a, t0); err != nil {
			t.Errorf("%+v: %v", a, err)
		}
	}
	if err := decision.MayDecide(q, decision.Who{By: "bob"}, approve, t0); err != nil {
		t.Fatalf("another principal: %v", err)
	}
}

func TestRecordAndSame(t *testing.T) {
	it := inDoubt()
	a := decision.Answer{Kind: tool.Skip, Message: "m", Via: "api", ClaimedVia: "cli", By: "alice"}
	d := a.Record(t0)
	if d.Kind != "skip" || d.Approved || d.Message != "m" || d.Via != "api" || d.ClaimedVia != "cli" || d.By != "alice" || !d.At.Equal(t0) {
		t.Fatalf("record %+v", d)
	}
	if (decision.Answer{Kind: tool.Approve}).StoredKind() != "" {
		t.Fatal("an approval keeps no kind")
	}
	done := decidedAs(it, store.Rejected, d)
	if !decision.Same(done, a) || decision.Same(done, decision.Answer{Kind: tool.Retry, Approved: true}) {
		t.Fatal("same")
	}
	ap := decidedAs(approval(refundTool()), store.Approved, store.Decision{Approved: true, EditedArgs: json.RawMessage(`{"a":1,"b":2}`)})
	if !decision.Same(ap, decision.Answer{Approved: true, EditedArgs: json.RawMessage(`{"b":2, "a":1}`)}) {
		t.Fatal("edits compare as JSON")
	}
	if decision.Same(inDoubt(), a) {
		t.Fatal("an undecided interrupt repeats nothing")
	}
}

func TestCheckMessage(t *testing.T) {
	if decision.CheckMessage(strings.Repeat("x", decision.MaxMessageBytes)) != nil {
		t.Fatal("a message at the limit is fine")
	}
	var de *decision.Error
	if err := decision.CheckMessage(strings.Repeat("x", decision.MaxMessageBytes+1)); !errors.As(err, &de) ||
		de.Field != decision.FieldMessage || de.Message != "The message is longer than 4000 bytes." {
		t.Fatalf("too long: %v", err)
	}
}
