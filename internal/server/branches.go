package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// MessageView is a stored message as the thread routes show it: with its
// sequence number in the thread (which the stored JSON does not hold).
type MessageView struct {
	message.Message
	Seq int64 `json:"seq"`
}

// SeqMessages are a conversation whose JSON carries each message's seq
// (as MessageView), and reads it back into Seq.
type SeqMessages []message.Message

// MarshalJSON writes the messages as MessageViews.
func (ms SeqMessages) MarshalJSON() ([]byte, error) {
	views := make([]MessageView, len(ms))
	for i, m := range ms {
		views[i] = MessageView{Message: m, Seq: m.Seq}
	}
	return json.Marshal(views)
}

// UnmarshalJSON reads MessageViews.
func (ms *SeqMessages) UnmarshalJSON(b []byte) error {
	var views []MessageView
	if err := json.Unmarshal(b, &views); err != nil {
		return err
	}
	*ms = make(SeqMessages, len(views))
	for i, v := range views {
		(*ms)[i] = v.Message
		(*ms)[i].Seq = v.Seq
	}
	return nil
}

// BranchView is one branch in GET /v1/threads/{id}/branches.
type BranchView struct {
	ID            int64     `json:"id"`
	Parent        int64     `json:"parent"`
	ForkSeq       int64     `json:"forkSeq"`
	ForkMessageID string    `json:"forkMessageId"`
	TipSeq        int64     `json:"tipSeq"`
	TipMessageID  string    `json:"tipMessageId"`
	Messages      int       `json:"messages"`
	Head          bool      `json:"head"`
	CreatedAt     time.Time `json:"createdAt"`
}

// BranchList is GET /v1/threads/{id}/branches.
type BranchList struct {
	Object string       `json:"object"`
	Head   int64        `json:"head"`
	Data   []BranchView `json:"data"`
}

// ThreadState is GET /v1/threads/{id}/state: the state right after
// message At (Seq, on Branch).
type ThreadState struct {
	Object string          `json:"object"`
	At     string          `json:"at"`
	Seq    int64           `json:"seq"`
	Branch int64           `json:"branch"`
	State  json.RawMessage `json:"state"`
}

// threadNotFound is the 404 of a thread the tenant does not have.
func threadNotFound(id string) error {
	return apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("No thread has the id %q.", id))
}

// threadErr maps the store's errors of the thread id: the thread missing
// is its 404, a branch or message missing within it a 404 naming param
// (the request's field that named it); others pass.
func threadErr(err error, id, param string) error {
	var me *store.MissingError
	switch {
	case errors.As(err, &me):
		e := apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("Thread %q has no %s %s.", id, me.What, me.Name))
		e.Param, e.Err = param, err
		return e
	case errors.Is(err, store.ErrNotFound):
		return threadNotFound(id)
	}
	return err
}

// branchParam reads ?branch= (ok false when absent).
func branchParam(r *http.Request) (int64, bool, error) {
	v := r.URL.Query().Get("branch")
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, apierror.Invalid("branch", "branch must be a whole number: a branch id of the thread.")
	}
	return n, true, nil
}

// threadView is the ThreadView of a thread along branch (the head when
// !ok).
func (s *Server) threadView(r *http.Request, th *store.Thread, branch int64, ok bool) (*ThreadView, error) {
	ctx, tenant := r.Context(), th.Tenant
	var (
		msgs []message.Message
		err  error
	)
	if ok && branch != th.HeadBranch {
		msgs, err = s.Store.BranchPath(ctx, tenant, th.ID, branch)
	} else {
		branch = th.HeadBranch
		msgs, err = s.Store.Messages(ctx, tenant, th.ID)
	}
	if err != nil {
		return nil, threadErr(err, th.ID, "branch")
	}
	pending, err := s.Store.ListInterrupts(ctx, tenant, store.InterruptFilter{ThreadID: th.ID, Status: store.Pending})
	if err != nil {
		return nil, err
	}
	if msgs == nil {
		msgs = []message.Message{}
	}
	if pending == nil {
		pending = []store.Interrupt{}
	}
	return &ThreadView{Thread: *th, Branch: branch, Messages: msgs, Pending: pending}, nil
}

// listBranches is GET /v1/threads/{id}/branches.
func (s *Server) listBranches(w http.ResponseWriter, r *http.Request) error {
	tenant, id := PrincipalFrom(r.Context()).Tenant, r.PathValue("id")
	th, err := s.Store.GetThread(r.Context(), tenant, id)
	if err != nil {
		return threadErr(err, id, "")
	}
	bs, err := s.Store.Branches(r.Context(), tenant, id)
	if err != nil {
		return threadErr(err, id, "")
	}
	list := BranchList{Object: "list", Head: th.HeadBranch, Data: make([]BranchView, len(bs))}
	for i, b := range bs {
		list.Data[i] = BranchView{ID: b.ID, Parent: b.Parent, ForkSeq: b.ForkSeq, ForkMessageID: b.ForkMessageID,
			TipSeq: b.TipSeq, TipMessageID: b.TipMessageID, Messages: b.Messages, Head: b.ID == th.HeadBranch, CreatedAt: b.CreatedAt}
	}
	return httpjson.Write(w, http.StatusOK, list)
}

// threadState is GET /v1/threads/{id}/state[?at=<message id>].
func (s *Server) threadState(w http.ResponseWriter, r *http.Request) error {
	ctx, tenant, id := r.Context(), PrincipalFrom(r.Context()).Tenant, r.PathValue("id")
	at := r.URL.Query().Get("at")
	if at == "" {
		return s.headState(w, r, tenant, id)
	}
	ref, err := s.Store.FindMessage(ctx, tenant, id, at)
	if err != nil {
		return threadErr(err, id, "at")
	}
	st, err := s.Store.StateAt(ctx, tenant, id, ref.Seq)
	if err != nil {
		return threadErr(err, id, "at")
	}
	return httpjson.Write(w, http.StatusOK, ThreadState{Object: "thread.state", At: at, Seq: ref.Seq, Branch: ref.Branch, State: st})
}

// headState is the current state of the head, at its tip.
func (s *Server) headState(w http.ResponseWriter, r *http.Request, tenant, id string) error {
	th, err := s.Store.GetThread(r.Context(), tenant, id)
	if err != nil {
		return threadErr(err, id, "")
	}
	body := ThreadState{Object: "thread.state", Branch: th.HeadBranch, State: th.State}
	bs, err := s.Store.Branches(r.Context(), tenant, id)
	if err != nil {
		return threadErr(err, id, "")
	}
	for _, b := range bs {
		if b.ID == th.HeadBranch {
			body.At, body.Seq = b.TipMessageID, b.TipSeq
		}
	}
	return httpjson.Write(w, http.StatusOK, body)
}

// setHead is POST /v1/threads/{id}/head: {"branch": N} or {"at": "<message id>"}.
func (s *Server) setHead(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Branch *int64  `json:"branch"`
		At     *string `json:"at"`
	}
	if err := decodeOptional(r, &body); err != nil {
		return err
	}
	if (body.Branch == nil) == (body.At == nil) {
		return apierror.Invalid("", "Give exactly one of `branch` (a branch id) and `at` (a message id to rewind to).")
	}
	ctx, tenant, id := r.Context(), PrincipalFrom(r.Context()).Tenant, r.PathValue("id")
	h := store.SetHead{Tenant: tenant, ThreadID: id, Now: s.Now()}
	param := "branch"
	if body.Branch != nil {
		h.Branch = *body.Branch
	} else {
		param = "at"
		ref, err := s.Store.FindMessage(ctx, tenant, id, *body.At)
		if err != nil {
			return threadErr(err, id, param)
		}
		h.At = ref.Seq
	}
	th, err := s.Store.SetHead(ctx, h)
	if err != nil {
		return threadErr(err, id, param)
	}
	view, err := s.threadView(r, th, th.HeadBranch, false)
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, view)
}

// fork is POST /v1/threads/{id}/fork: {"at"?: "<message id>" | <event
// seq>, "threadId"?: "<new id>"}.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		At       json.RawMessage `json:"at"`
		ThreadID *string         `json:"threadId"`
	}
	if err := decodeOptional(r, &body); err != nil {
		return err
	}
	newID := s.Runner.NewID("thr")
	if body.ThreadID != nil {
		if *body.ThreadID == "" {
			return apierror.Invalid("threadId", "`threadId` must not be empty: omit it for a new id.")
		}
		if err := apierror.CheckID("threadId", *body.ThreadID); err != nil {
			return err
		}
		newID = *body.ThreadID
	}
	ctx, tenant, id := r.Context(), PrincipalFrom(r.Context()).Tenant, r.PathValue("id")
	at, err := s.forkPoint(r, tenant, id, body.At)
	if err != nil {
		return err
	}
	th, err := s.Store.Fork(ctx, store.Fork{Tenant: tenant, ThreadID: id, NewID: newID, At: at, Now: s.Now(),
		User: PrincipalFrom(ctx).User.ID})
	if errors.Is(err, store.ErrThreadExists) {
		e := apierror.From(err)
		e.Param = "threadId"
		return e
	}
	if err != nil {
		return threadErr(err, id, "at")
	}
	view, err := s.threadView(r, th, 0, false)
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusCreated, view)
}

// forkPoint is the seq of the message a fork's "at" names: a message id
// (a string), or an event seq (a number: the last message the thread's
// events name at or before it); 0 for none (the head's whole path).
func (s *Server) forkPoint(r *http.Request, tenant, id string, at json.RawMessage) (int64, error) {
	at = bytes.TrimSpace(at)
	if len(at) == 0 || string(at) == "null" {
		return 0, nil
	}
	var name string
	if err := json.Unmarshal(at, &name); err == nil {
		if name == "" {
			return 0, apierror.Invalid("at", "`at` must name a message id or an event seq.")
		}
		ref, err := s.Store.FindMessage(r.Context(), tenant, id, name)
		if err != nil {
			return 0, threadErr(err, id, "at")
		}
		return ref.Seq, nil
	}
	seq, err := strconv.ParseInt(string(at), 10, 64)
	if err != nil || seq < 1 {
		return 0, apierror.Invalid("at", "`at` must be a message id (a string) or an event seq (a whole number from 1).")
	}
	return s.eventMessage(r, tenant, id, seq)
}

// eventMessage is the seq of the last stored message of the thread that
// its events name at or before event seq.
func (s *Server) eventMessage(r *http.Request, tenant, id string, seq int64) (int64, error) {
	const page = 500
	var named []string
	for after := int64(0); after < seq; {
		evs, err := s.Store.Events(r.Context(), tenant, id, after, int(min(page, seq-after)))
		if err != nil {
			return 0, threadErr(err, id, "")
		}
		for _, e := range evs {
			named = append(named, messagesNamed(e)...)
		}
		if len(evs) == 0 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	for i := len(named) - 1; i >= 0; i-- {
		ref, err := s.Store.FindMessage(r.Context(), tenant, id, named[i])
		var me *store.MissingError
		switch {
		case err == nil:
			return ref.Seq, nil
		case !errors.As(err, &me):
			return 0, threadErr(err, id, "at")
		}
	}
	e := apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("Thread %q records no message at or before event %d.", id, seq))
	e.Param = "at"
	return 0, e
}

// messagesNamed lists the message ids an event names, in order.
func messagesNamed(e event.Event) []string {
	var out []string
	for _, m := range e.Messages {
		out = append(out, m.ID)
	}
	if e.MessageID != "" {
		out = append(out, e.MessageID)
	}
	if e.Outcome != nil && e.Outcome.PendingMessageID != "" {
		out = append(out, e.Outcome.PendingMessageID)
	}
	return out
}
