package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// ModelInfo is one agent in GET /v1/models: a superset both the OpenAI and
// the Anthropic SDKs accept.
type ModelInfo struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Type        string `json:"type"`
	Created     int64  `json:"created"`
	CreatedAt   string `json:"created_at"`
	OwnedBy     string `json:"owned_by"`
	DisplayName string `json:"display_name"`
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func modelInfo(name string) ModelInfo {
	return ModelInfo{ID: name, Object: "model", Type: "model", Created: epoch.Unix(), CreatedAt: epoch.Format(time.RFC3339),
		OwnedBy: "stackbone", DisplayName: name}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) error {
	data := []ModelInfo{}
	for _, a := range s.Agents.List() {
		data = append(data, modelInfo(a.Name))
	}
	body := map[string]any{"object": "list", "data": data, "has_more": false, "first_id": nil, "last_id": nil}
	if len(data) > 0 {
		body["first_id"], body["last_id"] = data[0].ID, data[len(data)-1].ID
	}
	return httpjson.Write(w, http.StatusOK, body)
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("id")
	if s.Agents.Get(name) == nil {
		return apierror.New(apierror.NotFound, "model_not_found", fmt.Sprintf("The model `%s` does not exist.", name))
	}
	return httpjson.Write(w, http.StatusOK, modelInfo(name))
}

// AgentInfo is GET /v1/agents/{name}: an agent, the tools its model sees
// (built-ins, its own and its MCP servers' that are available now) and the
// state of each MCP server.
type AgentInfo struct {
	Object     string                  `json:"object"`
	Name       string                  `json:"name"`
	Model      string                  `json:"model"`
	Tools      []AgentTool             `json:"tools"`
	MCPServers []agent.MCPServerStatus `json:"mcpServers"`
	// A2AAgents are the agent's remote A2A agents (header values withheld).
	A2AAgents []agent.A2AAgentInfo `json:"a2aAgents"`
}

// AgentTool is one tool in AgentInfo.
type AgentTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Source is "builtin", "agent" or "mcp".
	Source string `json:"source"`
	// MCPServer names the server of an MCP tool.
	MCPServer     string `json:"mcpServer,omitempty"`
	NeedsApproval bool   `json:"needsApproval"`
}

func (s *Server) agentInfo(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	spec := s.Agents.Get(name)
	if spec == nil {
		return apierror.New(apierror.NotFound, "agent_not_found", fmt.Sprintf("The agent `%s` does not exist.", name))
	}
	info := AgentInfo{Object: "agent", Name: spec.Name, Model: spec.Model, Tools: []AgentTool{}, MCPServers: []agent.MCPServerStatus{},
		A2AAgents: spec.A2AAgentInfos()}
	add := func(t *tool.Tool, source, server string) {
		info.Tools = append(info.Tools, AgentTool{Name: t.Name, Description: t.Description, Source: source, MCPServer: server,
			NeedsApproval: t.Approval != nil})
	}
	for _, t := range s.Runner.Builtins(spec) {
		add(t, "builtin", "")
	}
	for _, t := range spec.Tools {
		add(t, "agent", "")
	}
	if spec.Dynamic != nil {
		info.MCPServers = spec.Dynamic.Servers()
		owner := map[string]string{}
		for _, st := range info.MCPServers {
			for _, n := range st.Tools {
				owner[n] = st.Name
			}
		}
		dyn, _ := spec.Dynamic.Tools()
		for _, t := range dyn {
			add(t, "mcp", owner[t.Name])
		}
	}
	return httpjson.Write(w, http.StatusOK, info)
}

// HealthPingTimeout bounds /healthz's database ping, so a load balancer gets
// a 503 within a second from a server whose database stopped answering,
// not a timeout.
const HealthPingTimeout = 800 * time.Millisecond

// HealthWriteWindow is how long /healthz trusts the outcome of the store's
// latest write: a failed write keeps /healthz at 503 for that long at least,
// and when no write ended within it, /healthz writes a probe row (one at a
// time, so at most one per window however often it is asked).
const HealthWriteWindow = 5 * time.Second

// CodeStoreUnwritable is the code of /healthz's 503 when the database
// answers but does not take writes.
const CodeStoreUnwritable = "store_unwritable"

// healthz is the readiness probe: 200 when the store answers and takes
// writes, else 503 with the reason (store_unavailable: the database does
// not answer; store_unwritable: it answers, but its writes fail).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), HealthPingTimeout)
	defer cancel()
	// A driver that does not heed its context (a connection stuck in a
	// write) still cannot hold the answer past the deadline.
	done := make(chan error, 1)
	go func() { done <- s.storeReady(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = fmt.Errorf("%w: ping: %v", store.ErrUnavailable, ctx.Err())
	}
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, map[string]any{"status": "ok", "agents": len(s.Agents.List())})
}

// storeReady checks the store answers (Ping) and takes writes: the outcome
// of its latest write when one ended within HealthWriteWindow, else that of
// a probe write.
func (s *Server) storeReady(ctx context.Context) error {
	if err := s.Store.Ping(ctx); err != nil {
		return fmt.Errorf("%w: ping: %v", store.ErrUnavailable, err)
	}
	if st, ok := s.recentWrite(); ok {
		return unwritable(st.Err)
	}
	select {
	case s.probing <- struct{}{}:
		defer func() { <-s.probing }()
	case <-ctx.Done():
		return fmt.Errorf("%w: probe write: %v", store.ErrUnavailable, ctx.Err())
	}
	if st, ok := s.recentWrite(); ok {
		return unwritable(st.Err) // the probe another call just wrote
	}
	return unwritable(s.Store.ProbeWrite(ctx))
}

// recentWrite returns the outcome of the store's latest write when it
// ended within HealthWriteWindow.
func (s *Server) recentWrite() (store.WriteStatus, bool) {
	st := s.Store.LastWrite()
	return st, !st.At.IsZero() && s.Now().Sub(st.At) < HealthWriteWindow
}

// unwritable is /healthz's 503 for a failed write (nil for none).
func unwritable(err error) error {
	if err == nil {
		return nil
	}
	e := apierror.New(apierror.Unavailable, CodeStoreUnwritable,
		"The database answers but does not take writes: its latest write failed (a full disk, a read-only or failing file system, a lost connection).")
	e.Err = err
	return e
}

// List is a page of items.
type List[T any] struct {
	Object string `json:"object"`
	Data   []T    `json:"data"`
}

func limitParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return store.DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > store.MaxLimit {
		return 0, apierror.Invalid("limit", "limit must be a whole number from 1 to %d.", store.MaxLimit)
	}
	return n, nil
}

func (s *Server) listDecisions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	st := store.InterruptStatus(q.Get("status"))
	switch st {
	case "", store.Pending, store.Approved, store.Rejected:
	default:
		return apierror.Invalid("status", "status must be pending, approved or rejected.")
	}
	p := PrincipalFrom(r.Context())
	items, err := s.Store.ListInterrupts(r.Context(), p.Tenant,
		store.InterruptFilter{ThreadID: q.Get("thread"), Agent: q.Get("agent"), Status: st, Limit: limit,
			Scoped: !p.SeesAllDecisions(), User: p.User.ID})
	if err != nil {
		return err
	}
	if items == nil {
		items = []store.Interrupt{}
	}
	return httpjson.Write(w, http.StatusOK, List[store.Interrupt]{Object: "list", Data: items})
}

func (s *Server) getDecision(w http.ResponseWriter, r *http.Request) error {
	it, err := s.visibleDecision(r)
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, it)
}

// visibleDecision is the decision {id} of the caller's tenant, when the
// caller sees it (seesDecision), else a 404 as for an unknown id.
func (s *Server) visibleDecision(r *http.Request) (*store.Interrupt, error) {
	id := r.PathValue("id")
	notFound := apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("No decision has the id %q.", id))
	it, err := s.Store.GetInterrupt(r.Context(), PrincipalFrom(r.Context()).Tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	if err := s.seesDecision(r, it, notFound); err != nil {
		return nil, err
	}
	return it, nil
}

// ClientHeader is the header in which a client names itself ("cli",
// "studio"). It is a claim: decisions record it as claimedVia, never as
// decidedVia.
const ClientHeader = "x-stackbone-client"

// decidedVia returns how a decision over HTTP came in: proven is what the
// credential proves ("studio" for Studio's session cookie, else "api"),
// claimed is what the client says it is in ClientHeader (empty when it says
// nothing). A claim is a short token; anything else is refused.
func decidedVia(r *http.Request) (proven, claimed string, err error) {
	proven = PrincipalFrom(r.Context()).Via
	if proven == "" {
		proven = "api"
	}
	claimed = r.Header.Get(ClientHeader)
	if len(claimed) > 32 || strings.IndexFunc(claimed, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}) >= 0 {
		return "", "", apierror.Invalid(ClientHeader, "The %s header must be a short name such as cli: at most 32 letters, digits, '-', '_' or '.'.", ClientHeader)
	}
	return proven, claimed, nil
}

func decodeOptional(r *http.Request, v any) error {
	body, err := httpjson.ReadBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apierror.Invalid("", "The request body is not valid: %v", err)
	}
	return nil
}

// deciding is the role check of the decision routes: a key whose role
// cannot decide gets 403 forbidden_role before its body is read (whatever
// the id: the answer tells nothing of the decision); then a decision the
// caller does not see (another user's thread) is 404.
func (s *Server) deciding(h HandlerFunc) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := PrincipalFrom(r.Context()).Allow(ActDecide, ""); err != nil {
			return err
		}
		if _, err := s.visibleDecision(r); err != nil {
			return err
		}
		return h(w, r)
	}
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		EditedArgs json.RawMessage `json:"editedArgs"`
	}
	if err := decodeOptional(r, &body); err != nil {
		return err
	}
	if string(bytes.TrimSpace(body.EditedArgs)) == "null" {
		body.EditedArgs = nil
	}
	return s.decide(w, r, engine.Decision{Approved: true, EditedArgs: body.EditedArgs})
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Message string `json:"message"`
	}
	if err := decodeOptional(r, &body); err != nil {
		return err
	}
	if err := decision.CheckMessage(body.Message); err != nil {
		return err
	}
	return s.decide(w, r, engine.Decision{Approved: false, Message: body.Message})
}

// retry runs an in-doubt call again (a call that may already have run
// before a crash); no body.
func (s *Server) retry(w http.ResponseWriter, r *http.Request) error {
	if err := decodeOptional(r, &struct{}{}); err != nil {
		return err
	}
	return s.decide(w, r, engine.Decision{Kind: tool.Retry})
}

// skip does not run an in-doubt call again; the model gets the message as
// the call's result, or a result saying the outcome is unknown.
func (s *Server) skip(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Message string `json:"message"`
	}
	if err := decodeOptional(r, &body); err != nil {
		return err
	}
	if err := decision.CheckMessage(body.Message); err != nil {
		return err
	}
	return s.decide(w, r, engine.Decision{Kind: tool.Skip, Message: body.Message})
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, d engine.Decision) error {
	p := PrincipalFrom(r.Context())
	via, claimed, err := decidedVia(r)
	if err != nil {
		return err
	}
	d.Via, d.ClaimedVia, d.By = via, claimed, p.Name
	it, err := s.Runner.Decide(r.Context(), p.Tenant, r.PathValue("id"), d)
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, it)
}

func (s *Server) listThreads(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	st := store.ThreadStatus(q.Get("status"))
	switch st {
	case "", store.Idle, store.Running, store.Waiting, store.Queued, store.Failed:
	default:
		return apierror.Invalid("status", "status must be idle, running, waiting, queued or failed.")
	}
	p := PrincipalFrom(r.Context())
	items, err := s.Store.ListThreads(r.Context(), p.Tenant,
		store.ThreadFilter{Agent: q.Get("agent"), Status: st, Limit: limit, Scoped: !p.AnyOwner(), User: p.User.ID})
	if err != nil {
		return err
	}
	if items == nil {
		items = []store.Thread{}
	}
	return httpjson.Write(w, http.StatusOK, List[store.Thread]{Object: "list", Data: items})
}

// ThreadView is a thread with its conversation along one branch (the
// head unless ?branch= names another) and its pending decisions.
type ThreadView struct {
	store.Thread
	// Branch is the branch whose path Messages are.
	Branch   int64             `json:"branch"`
	Messages SeqMessages       `json:"messages"`
	Pending  []store.Interrupt `json:"pending"`
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request) error {
	branch, ok, err := branchParam(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	th, err := s.Store.GetThread(r.Context(), PrincipalFrom(r.Context()).Tenant, id)
	if err != nil {
		return threadErr(err, id, "")
	}
	view, err := s.threadView(r, th, branch, ok)
	if err != nil {
		return err
	}
	return httpjson.Write(w, http.StatusOK, view)
}

// threadEvents streams a thread's events: the stored ones after Last-Event-ID
// (or ?after=), then live ones. Stored events carry their sequence number as
// the SSE id; live-only events (token deltas) carry none. No stored event is
// missed: a hole in the sequence, or events the bus dropped for a slow
// stream, is filled from the store.
func (s *Server) threadEvents(w http.ResponseWriter, r *http.Request) error {
	tenant := PrincipalFrom(r.Context()).Tenant
	id := r.PathValue("id")
	if _, err := s.Store.GetThread(r.Context(), tenant, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierror.New(apierror.NotFound, "not_found", fmt.Sprintf("No thread has the id %q.", id))
		}
		return err
	}
	after := int64(0)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	} else if v := r.URL.Query().Get("after"); v != "" {
		after, _ = strconv.ParseInt(v, 10, 64)
	}
	sub := s.Runner.Bus.Subscribe(tenant, id)
	sw := sse.New(w)
	if err := sw.Comment("stream open"); err != nil {
		sub.Close()
		return nil
	}
	// Events go by pointer: copies of them would make this long-lived
	// frame bigger, and an idle stream's stack with it.
	send := func(e *event.Event) error {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if e.Seq > 0 {
			return sw.IDData(strconv.FormatInt(e.Seq, 10), b)
		}
		return sw.Data(b)
	}
	// replay sends the stored events after the last one sent. Sequence
	// numbers are contiguous per thread, so it is how the stream starts and
	// how it fills any hole the live feed leaves.
	replay := func(ctx context.Context) bool {
		for {
			evs, err := s.Store.Events(ctx, tenant, id, after, 500)
			if err != nil {
				if ctx.Err() == nil {
					s.Logger.Warn("replay thread events", "thread", id, "err", err)
				}
				return false
			}
			for i := range evs {
				if err := send(&evs[i]); err != nil {
					return false
				}
				after = evs[i].Seq
			}
			if len(evs) < 500 {
				return true
			}
		}
	}
	if !replay(r.Context()) {
		sub.Close()
		return nil
	}
	s.Stream(r, sw, Feed{
		Sub: sub,
		// Fell behind, and the bus dropped events for this stream: its
		// stored events come again from the store, its token deltas are
		// superseded by the stored text_end.
		Resync: replay,
		Deliver: func(ctx context.Context, e *event.Event) bool {
			if e.Seq > after+1 && !replay(ctx) {
				return false // a hole: the events before e come from the store
			}
			if e.Seq > 0 && e.Seq <= after {
				return true
			}
			if e.Seq > 0 {
				after = e.Seq
			}
			return send(e) == nil
		},
	})
	return nil
}
