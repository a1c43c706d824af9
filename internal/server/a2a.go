package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/wire/a2a"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// A2ARoute is the base of an agent's A2A endpoint (JSON-RPC binding).
const A2ARoute = "/a2a/"

// A2AVia is the decidedVia of a decision made over A2A.
const A2AVia = "a2a"

// a2aRoutes serves A2A 1.0: every agent's Agent Card, the server's root
// card, and the JSON-RPC binding at POST /a2a/{agent}.
func (s *Server) a2aRoutes() {
	s.SetErrorWriter(WireA2A, writeA2AError)
	s.Handle("GET /.well-known/agent-card.json", WireOpenAI, false, s.a2aRootCard)
	s.Handle("GET /a2a/{agent}/.well-known/agent-card.json", WireOpenAI, false, s.a2aAgentCard)
	s.Handle("POST /a2a/{agent}", WireA2A, true, s.a2aRPC)
	for _, m := range []string{"GET", "POST", "DELETE"} {
		s.Handle(m+" /a2a/{agent}/{rest...}", WireA2A, true, s.a2aREST)
	}
}

// writeA2AError writes an error returned before a JSON-RPC request was
// read (authentication, a body over the limit, an unknown agent) as a
// JSON-RPC error response with the HTTP status of the error.
func writeA2AError(w http.ResponseWriter, e *apierror.Error) error {
	return httpjson.Write(w, e.Status, a2a.ErrorResponse(nil, a2aErrorOf(e)))
}

// a2aErrorOf is the one mapping of Stackbone's errors to A2A's JSON-RPC
// errors: an *a2a.Error as it is; a store.ErrNotFound (a task or thread the
// caller cannot see) TaskNotFound; else by the apierror's kind, with its
// code as the ErrorInfo reason: invalid requests −32602, a busy or waiting
// conversation UnsupportedOperation, a refused key −32000, anything else
// −32603.
func a2aErrorOf(err error) *a2a.Error {
	var ae *a2a.Error
	if errors.As(err, &ae) {
		return ae
	}
	e := apierror.From(err)
	out := &a2a.Error{Message: e.Message, Reason: e.Code, HTTPStatus: e.Status}
	switch e.Kind {
	case apierror.InvalidRequest, apierror.TooLarge:
		out.Code = a2a.CodeInvalidParams
		if e.Param != "" {
			out.Details = append(out.Details, map[string]any{"@type": "type.googleapis.com/google.rpc.BadRequest",
				"fieldViolations": []map[string]string{{"field": e.Param, "description": e.Message}}})
		}
	case apierror.Authentication, apierror.Permission:
		out.Code = -32000
	case apierror.NotFound:
		out.Code = a2a.CodeTaskNotFound
	case apierror.Conflict:
		out.Code, out.HTTPStatus = a2a.CodeUnsupportedOperation, http.StatusBadRequest
	default:
		out.Code = a2a.CodeInternal
	}
	return out
}

// a2aBase is the server's base URL as its clients reach it: the public URL
// when set, else the request's scheme and host.
func (s *Server) a2aBase(r *http.Request) string {
	if s.Config.PublicURL != "" {
		return s.Config.PublicURL
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// a2aCard is an agent's Agent Card: its endpoint, capabilities, skills
// (the agent itself, then one per tool) and, when the server takes keys,
// the bearer scheme.
func (s *Server) a2aCard(r *http.Request, spec *agent.Spec) a2a.AgentCard {
	desc := spec.Description
	if desc == "" {
		desc = firstLine(spec.Instructions)
	}
	if desc == "" {
		desc = "The Stackbone agent " + spec.Name + "."
	}
	endpoint := s.a2aBase(r) + A2ARoute + url.PathEscape(spec.Name)
	card := a2a.AgentCard{
		Name: spec.Name, Description: desc, Version: s.Version,
		SupportedInterfaces: []a2a.AgentInterface{{URL: endpoint, ProtocolBinding: a2a.BindingJSONRPC, ProtocolVersion: a2a.ProtocolVersion},
			{URL: endpoint, ProtocolBinding: a2a.BindingHTTPJSON, ProtocolVersion: a2a.ProtocolVersion}},
		Provider:           &a2a.AgentProvider{Organization: "Stackbone", URL: s.a2aBase(r)},
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true, ExtendedAgentCard: true},
		DefaultInputModes:  []string{"text/plain", "application/json", "image/*"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             []a2a.AgentSkill{{ID: spec.Name, Name: spec.Name, Description: desc, Tags: []string{"agent"}}},
	}
	for _, t := range spec.Tools {
		tags := []string{"tool"}
		if t.Approval != nil {
			tags = append(tags, "approval")
		}
		d := t.Description
		if d == "" {
			d = "The tool " + t.Name + "."
		}
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: spec.Name + "." + t.Name, Name: t.Name, Description: d, Tags: tags})
	}
	if !s.Config.Open() {
		card.SecuritySchemes = map[string]a2a.SecurityScheme{"bearer": {HTTPAuthSecurityScheme: &a2a.HTTPAuthSecurityScheme{
			Scheme: "Bearer", Description: "A Stackbone API key (Authorization: Bearer <key>, or x-api-key)."}}}
		card.SecurityRequirements = []a2a.SecurityRequirement{{Schemes: map[string]a2a.StringList{"bearer": {List: []string{}}}}}
		if s.jwt != nil {
			// End users' tokens from the configured provider: either
			// requirement will do.
			card.SecuritySchemes["oidc"] = a2a.SecurityScheme{OpenIDConnectSecurityScheme: &a2a.OpenIDConnectSecurityScheme{
				Description:      "An end user's access token from the OpenID provider (Authorization: Bearer <token>).",
				OpenIDConnectURL: strings.TrimSuffix(s.jwt.Issuer(), "/") + "/.well-known/openid-configuration"}}
			card.SecurityRequirements = append(card.SecurityRequirements, a2a.SecurityRequirement{Schemes: map[string]a2a.StringList{"oidc": {List: []string{}}}})
		}
	}
	return card
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}

func (s *Server) writeCard(w http.ResponseWriter, r *http.Request, spec *agent.Spec) error {
	w.Header().Set("Cache-Control", "max-age=60")
	return httpjson.Write(w, http.StatusOK, s.a2aCard(r, spec))
}

// a2aAgentCard is GET /a2a/{agent}/.well-known/agent-card.json.
func (s *Server) a2aAgentCard(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("agent")
	spec := s.Agents.Get(name)
	if spec == nil {
		return apierror.New(apierror.NotFound, "agent_not_found", fmt.Sprintf("The agent `%s` does not exist.", name))
	}
	return s.writeCard(w, r, spec)
}

// a2aRootCard is GET /.well-known/agent-card.json: the card of the one
// agent the server serves, or of STACKBONE_A2A_DEFAULT_AGENT among
// several; without it, a 404 naming each agent's card.
func (s *Server) a2aRootCard(w http.ResponseWriter, r *http.Request) error {
	specs := s.Agents.List()
	if name := s.Config.A2ADefaultAgent; name != "" {
		if spec := s.Agents.Get(name); spec != nil {
			return s.writeCard(w, r, spec)
		}
	}
	if len(specs) == 1 {
		return s.writeCard(w, r, specs[0])
	}
	cards := make([]string, 0, len(specs))
	for _, sp := range specs {
		cards = append(cards, s.a2aBase(r)+A2ARoute+url.PathEscape(sp.Name)+"/.well-known/agent-card.json")
	}
	slices.Sort(cards)
	e := apierror.New(apierror.NotFound, "a2a_agent_ambiguous",
		"This server serves several agents: each has its card at /a2a/{agent}/.well-known/agent-card.json (set STACKBONE_A2A_DEFAULT_AGENT to serve one here).")
	e.Details = map[string]any{"agentCards": cards}
	return e
}

// a2aCall is one JSON-RPC call being served.
type a2aCall struct {
	s    *Server
	w    http.ResponseWriter
	r    *http.Request
	spec *agent.Spec
	p    Principal
	id   json.RawMessage
	// rest is the HTTP+JSON binding: results are bare JSON, errors a
	// google.rpc.Status with the error's HTTP status, stream events bare.
	rest bool
}

// a2aRPC is POST /a2a/{agent}: one JSON-RPC 2.0 request of A2A 1.0. Its
// errors are JSON-RPC error responses (HTTP 200), mapped by a2aErrorOf.
func (s *Server) a2aRPC(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("agent")
	spec := s.Agents.Get(name)
	if spec == nil {
		return apierror.New(apierror.NotFound, "agent_not_found", fmt.Sprintf("The agent `%s` does not exist.", name))
	}
	body, err := httpjson.ReadBody(r)
	if err != nil {
		return err
	}
	c := &a2aCall{s: s, w: w, r: r, spec: spec, p: PrincipalFrom(r.Context())}
	req, perr := a2a.ParseRequest(body)
	c.id = req.ID
	if perr != nil {
		return c.fail(perr)
	}
	if err := c.version(); err != nil {
		return c.fail(err)
	}
	var cerr error
	switch req.Method {
	case a2a.MethodSendMessage:
		cerr = c.sendMessage(req.Params, false)
	case a2a.MethodSendStreamingMessage:
		cerr = c.sendMessage(req.Params, true)
	case a2a.MethodGetTask:
		cerr = c.getTask(req.Params)
	case a2a.MethodListTasks:
		cerr = c.listTasks(req.Params)
	case a2a.MethodCancelTask:
		cerr = c.cancelTask(req.Params)
	case a2a.MethodSubscribeToTask:
		cerr = c.subscribe(req.Params)
	case a2a.MethodCreatePushConfig:
		cerr = c.createPushConfig(req.Params)
	case a2a.MethodGetPushConfig:
		cerr = c.getPushConfig(req.Params)
	case a2a.MethodListPushConfigs:
		cerr = c.listPushConfigs(req.Params)
	case a2a.MethodDeletePushConfig:
		cerr = c.deletePushConfig(req.Params)
	case a2a.MethodGetExtendedAgentCard:
		cerr = c.result(s.a2aCard(r, spec))
	default:
		cerr = a2a.Errorf(a2a.CodeMethodNotFound, "Method %q not found: A2A 1.0 methods are PascalCase (SendMessage, GetTask, …).", req.Method)
	}
	if cerr != nil {
		return c.fail(cerr)
	}
	return nil
}

// version checks the client's A2A-Version (header, or query parameter):
// none means 0.3, which is not spoken.
func (c *a2aCall) version() error {
	v := c.r.Header.Get(a2a.VersionHeader)
	if v == "" {
		v = c.r.URL.Query().Get(a2a.VersionHeader)
	}
	if !a2a.SupportsVersion(v) {
		if v == "" {
			v = "0.3 (no A2A-Version header)"
		}
		return a2a.Errorf(a2a.CodeVersionNotSupported,
			"A2A version %s is not supported: this agent speaks A2A %s (send the header A2A-Version: %s).", v, a2a.ProtocolVersion, a2a.ProtocolVersion)
	}
	c.w.Header().Set(a2a.VersionHeader, a2a.ProtocolVersion)
	return nil
}

// a2aREST is the HTTP+JSON binding under /a2a/{agent}/: POST message:send
// and message:stream, GET tasks and tasks/{id}, POST tasks/{id}:cancel,
// GET or POST tasks/{id}:subscribe, the push config paths (refused), GET
// extendedAgentCard. Each maps onto the JSON-RPC method of the same
// operation, with its parameters from the path, query and body.
func (s *Server) a2aREST(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("agent")
	spec := s.Agents.Get(name)
	if spec == nil {
		return apierror.New(apierror.NotFound, "agent_not_found", fmt.Sprintf("The agent `%s` does not exist.", name))
	}
	c := &a2aCall{s: s, w: w, r: r, spec: spec, p: PrincipalFrom(r.Context()), rest: true}
	if err := c.version(); err != nil {
		return c.fail(err)
	}
	if err := c.serveREST(r.PathValue("rest")); err != nil {
		return c.fail(err)
	}
	return nil
}

func (c *a2aCall) serveREST(rest string) error {
	r := c.r
	body := func() (json.RawMessage, error) {
		b, err := httpjson.ReadBody(r)
		if err != nil {
			return nil, err
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			return json.RawMessage("{}"), nil
		}
		if !json.Valid(b) {
			return nil, a2a.Errorf(a2a.CodeParseError, "Invalid JSON payload.")
		}
		return b, nil
	}
	q := r.URL.Query()
	intParam := func(m map[string]any, name string) error {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return a2a.Errorf(a2a.CodeInvalidParams, "%s must be an integer, not %q.", name, v)
			}
			m[name] = n
		}
		return nil
	}
	params := func(m map[string]any) json.RawMessage {
		b, _ := json.Marshal(m)
		return b
	}
	switch {
	case r.Method == http.MethodPost && (rest == "message:send" || rest == "message:stream"):
		b, err := body()
		if err != nil {
			return err
		}
		return c.sendMessage(b, rest == "message:stream")
	case r.Method == http.MethodGet && rest == "tasks":
		m := map[string]any{"contextId": q.Get("contextId"), "status": q.Get("status"), "pageToken": q.Get("pageToken"),
			"includeArtifacts": q.Get("includeArtifacts") == "true"}
		for _, n := range []string{"pageSize", "historyLength"} {
			if err := intParam(m, n); err != nil {
				return err
			}
		}
		return c.listTasks(params(m))
	case r.Method == http.MethodGet && rest == "extendedAgentCard":
		return c.result(c.s.a2aCard(r, c.spec))
	case strings.HasPrefix(rest, "tasks/"):
		id, action, _ := strings.Cut(strings.TrimPrefix(rest, "tasks/"), "/")
		if action != "" {
			if kind, cid, _ := strings.Cut(action, "/"); kind == "pushNotificationConfigs" {
				return c.servePushREST(id, cid, body, intParam, params)
			}
			break
		}
		id, verb, _ := strings.Cut(id, ":")
		m := map[string]any{"id": id}
		switch {
		case verb == "" && r.Method == http.MethodGet:
			if err := intParam(m, "historyLength"); err != nil {
				return err
			}
			return c.getTask(params(m))
		case verb == "cancel" && r.Method == http.MethodPost:
			return c.cancelTask(params(m))
		case verb == "subscribe" && (r.Method == http.MethodGet || r.Method == http.MethodPost):
			return c.subscribe(params(m))
		}
	}
	return &a2a.Error{Code: a2a.CodeMethodNotFound, Message: fmt.Sprintf("No A2A operation at %s %s.", r.Method, r.URL.Path)}
}

// servePushREST serves the push config paths of task id: POST and GET
// tasks/{id}/pushNotificationConfigs (create, list), GET and DELETE
// tasks/{id}/pushNotificationConfigs/{cid}.
func (c *a2aCall) servePushREST(id, cid string, body func() (json.RawMessage, error), intParam func(map[string]any, string) error,
	params func(map[string]any) json.RawMessage) error {
	r := c.r
	switch {
	case cid == "" && r.Method == http.MethodPost:
		b, err := body()
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || m == nil {
			return a2a.Errorf(a2a.CodeInvalidParams, "The body is a TaskPushNotificationConfig object.")
		}
		m["taskId"] = id
		return c.createPushConfig(params(m))
	case cid == "" && r.Method == http.MethodGet:
		m := map[string]any{"taskId": id, "pageToken": r.URL.Query().Get("pageToken")}
		if err := intParam(m, "pageSize"); err != nil {
			return err
		}
		return c.listPushConfigs(params(m))
	case cid != "" && r.Method == http.MethodGet:
		return c.getPushConfig(params(map[string]any{"taskId": id, "id": cid}))
	case cid != "" && r.Method == http.MethodDelete:
		return c.deletePushConfig(params(map[string]any{"taskId": id, "id": cid}))
	}
	return &a2a.Error{Code: a2a.CodeMethodNotFound, Message: fmt.Sprintf("No A2A operation at %s %s.", r.Method, r.URL.Path)}
}

// result writes the call's result.
func (c *a2aCall) result(v any) error {
	if c.rest {
		return httpjson.Write(c.w, http.StatusOK, v)
	}
	return httpjson.Write(c.w, http.StatusOK, a2a.Result(c.id, v))
}

// fail writes err as the call's JSON-RPC error response (logged as the
// server logs every failed request).
func (c *a2aCall) fail(err error) error {
	e := a2aErrorOf(err)
	level := slog.LevelInfo
	if e.Code == a2a.CodeInternal {
		level = slog.LevelError
	}
	c.s.Logger.Log(c.r.Context(), level, "a2a call failed", "request_id", c.r.Context().Value(requestIDKey), "agent", c.spec.Name,
		"code", e.Code, "reason", e.Reason, "err", err)
	if c.rest {
		return httpjson.Write(c.w, e.Status(), e.StatusBody())
	}
	return httpjson.Write(c.w, http.StatusOK, a2a.ErrorResponse(c.id, e))
}

// a2aTask is a task as read back from its thread: the thread, where its
// turn's events begin, the last of them folded, and the tracker holding
// the folded task.
type a2aTask struct {
	th      *store.Thread
	turnSeq int64
	lastSeq int64
	tr      *a2a.Tracker
	current bool
	// queued: the task is a turn waiting in its thread's queue
	// (TASK_STATE_SUBMITTED); its id is the run it will start as.
	queued bool
}

// task reads task id of the caller's tenant on the call's agent: a task
// of another tenant, or of another agent, is TaskNotFound.
func (c *a2aCall) task(ctx context.Context, id string) (*a2aTask, error) {
	if id == "" {
		return nil, a2a.Errorf(a2a.CodeInvalidParams, "The task id is required.")
	}
	tenant := c.p.Tenant
	threadID, seq, err := c.s.Store.RunThread(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return c.queuedTask(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	th, err := c.s.Store.GetThread(ctx, tenant, threadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (th.Agent != c.spec.Name || !c.p.Sees(th.Owner))) {
		return nil, a2a.TaskNotFound(id) // another user's thread is as unknown
	}
	if err != nil {
		return nil, err
	}
	t := &a2aTask{th: th, turnSeq: seq, current: seq == th.Turn.Seq, tr: a2a.NewTracker(id, th.ID, c.s.Now)}
	var until int64
	if !t.current {
		runs, err := c.s.Store.ListRuns(ctx, tenant, th.ID)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			if r.TurnSeq > seq && (until == 0 || r.TurnSeq < until) {
				until = r.TurnSeq
			}
		}
		if until == 0 && th.Turn.Seq > seq {
			until = th.Turn.Seq
		}
	}
	for e, err := range c.s.Runner.Replay(ctx, tenant, th.ID, seq, until) {
		if err != nil {
			return nil, err
		}
		if e.Seq > 0 {
			t.lastSeq = e.Seq
		}
		t.tr.Apply(e)
	}
	if t.current {
		switch th.Status {
		case store.Running, store.Queued:
			if t.tr.State() != a2a.StateWorking {
				t.tr.SetState(a2a.StateWorking)
			}
		}
	}
	return t, nil
}

// queuedTask reads task id as a turn waiting in its thread's queue (an
// enqueue follow-up): SUBMITTED until it starts. None is TaskNotFound.
func (c *a2aCall) queuedTask(ctx context.Context, id string) (*a2aTask, error) {
	q, err := c.s.Store.QueuedTurn(ctx, c.p.Tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		// It may have started since the run was looked for.
		if threadID, _, rerr := c.s.Store.RunThread(ctx, c.p.Tenant, id); rerr == nil && threadID != "" {
			return c.task(ctx, id)
		}
		return nil, a2a.TaskNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	th, err := c.s.Store.GetThread(ctx, c.p.Tenant, q.ThreadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (th.Agent != c.spec.Name || !c.p.Sees(th.Owner))) {
		return nil, a2a.TaskNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	return &a2aTask{th: th, queued: true, tr: a2a.NewTracker(id, th.ID, func() time.Time { return q.CreatedAt })}, nil
}

// sendMessage is SendMessage and SendStreamingMessage: a message without a
// taskId starts a task (a turn) in its contextId's thread (a new thread
// when it has none); one naming an INPUT_REQUIRED task answers its
// pending decisions with decision data parts.
func (c *a2aCall) sendMessage(params json.RawMessage, stream bool) error {
	var req a2a.SendMessageRequest
	if e := a2a.DecodeParams(params, &req); e != nil {
		return e
	}
	if req.Message == nil {
		return a2a.Errorf(a2a.CodeInvalidParams, "The request needs a message.")
	}
	ctx := c.r.Context()
	var push *store.PushConfig
	if in := req.Configuration.Push(); in != nil {
		// Checked before anything starts: a bad config changes nothing.
		pc, err := c.pushConfigOf(ctx, in, "configuration.taskPushNotificationConfig.")
		if err != nil {
			return err
		}
		push = &pc
	}
	var run *engine.Run
	var tr *a2a.Tracker
	if req.Message.TaskID != "" {
		t, err := c.task(ctx, req.Message.TaskID)
		if err != nil {
			return err
		}
		if req.Message.ContextID != "" && req.Message.ContextID != t.th.ID {
			return a2a.Errorf(a2a.CodeInvalidParams, "Task %q belongs to context %q, not %q.", req.Message.TaskID, t.th.ID, req.Message.ContextID)
		}
		if run, err = c.decide(ctx, t, req.Message); err != nil {
			return err
		}
		tr = t.tr
	} else {
		if err := c.p.Allow(ActTurn, ""); err != nil {
			return err
		}
		um, e := a2a.UserMessage(req.Message)
		if e != nil {
			return e
		}
		threadID := req.Message.ContextID
		if threadID == "" {
			threadID = c.s.Runner.NewID("thr")
		} else if err := apierror.CheckID("message.contextId", threadID); err != nil {
			return err
		}
		in := engine.Input{Tenant: c.p.Tenant, Agent: c.spec.Name, Key: c.p.Name, DecidedBy: c.p.Name, ThreadID: threadID,
			Messages: []message.Message{um}, Multitask: c.r.Header.Get(MultitaskHeader), User: c.p.ToolUser(), AnyOwner: c.p.AnyOwner()}
		if in.User != nil {
			in.UserID = in.User.ID
		}
		if id := req.Message.MessageID; id != "" && len(id) <= 200 {
			in.IdempotencyKey = "a2a:" + id // a client's resend of a message attaches to its task
		}
		var err error
		if run, err = c.s.Runner.Start(ctx, in); err != nil {
			if e := apierror.From(err); e.Code == apierror.CodeBudgetExceeded {
				return c.rejected(threadID, e, stream)
			}
			return err
		}
		id, err := c.turnTask(ctx, threadID, run)
		if err != nil {
			run.Abandon()
			return err
		}
		tr = a2a.NewTracker(id, threadID, c.s.Now)
	}
	if push != nil {
		if err := c.inlinePush(ctx, tr.Task(nil, false).ID, *push); err != nil {
			run.Abandon()
			return err
		}
	}
	if stream {
		return c.stream(run, tr, true, false)
	}
	if req.Configuration.Immediate() {
		if tr.State() == a2a.StateSubmitted && c.isQueued(ctx, tr) {
			// A queued follow-up: SUBMITTED until the turn before ends.
			return c.result(a2a.StreamResponse{Task: ptr(tr.Task(historyOf(req.Configuration), true))})
		}
		// The task goes on without this request: read its start, then
		// leave it (a durable run goes on and is stored).
		for e := range run.Events() {
			tr.Apply(e)
			break
		}
		return c.result(a2a.StreamResponse{Task: ptr(tr.Task(historyOf(req.Configuration), true))})
	}
	stop := context.AfterFunc(ctx, run.Abandon)
	defer stop()
	for e := range run.Events() {
		tr.Apply(e)
		if st := tr.State(); st.Terminal() || st.Interrupted() {
			break
		}
	}
	if st := tr.State(); !st.Terminal() && !st.Interrupted() {
		return apierror.IncompleteRun()
	}
	return c.result(a2a.StreamResponse{Task: ptr(tr.Task(historyOf(req.Configuration), true))})
}

// rejected answers a message whose turn was refused before it started (a
// spent budget) with a task in TASK_STATE_REJECTED: its status message
// says why, its metadata holds the error's code, and the retry headers say
// when a turn may run again. Nothing was stored: the task is not found
// afterwards, and a new context stays unknown.
func (c *a2aCall) rejected(contextID string, e *apierror.Error, stream bool) error {
	apierror.SetRetryHeaders(c.w.Header(), e)
	id := c.s.Runner.NewID("run")
	task := a2a.Task{ID: id, ContextID: contextID, Status: a2a.TaskStatus{State: a2a.StateRejected,
		Timestamp: c.s.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		Message: &a2a.Message{MessageID: id + "-status-1", ContextID: contextID, TaskID: id, Role: a2a.RoleAgent,
			Parts: []a2a.Part{a2a.TextPart(e.Message)}}},
		Metadata: map[string]any{"stackbone": map[string]any{"code": e.Code}}}
	if !stream {
		return c.result(a2a.StreamResponse{Task: &task})
	}
	return c.writeTaskStream(task)
}

// streamTask is a stream of tr's task alone.
func (c *a2aCall) streamTask(tr *a2a.Tracker) error { return c.writeTaskStream(tr.Task(nil, true)) }

// writeTaskStream writes a stream of one event, the task, and ends it.
func (c *a2aCall) writeTaskStream(task a2a.Task) error {
	sw := sse.NewBuffered(c.w)
	var v any = a2a.Result(c.id, a2a.StreamResponse{Task: &task})
	if c.rest {
		v = a2a.StreamResponse{Task: &task}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := sw.Data(b); err != nil {
		return nil
	}
	return sw.Flush()
}

// isQueued reports whether tr's task is a turn still in its thread's
// queue.
func (c *a2aCall) isQueued(ctx context.Context, tr *a2a.Tracker) bool {
	_, err := c.s.Store.QueuedTurn(ctx, c.p.Tenant, tr.Task(nil, false).ID)
	return err == nil
}

// turnTask is the task id of a run Start returned: its own id for a new
// turn; for a retry that attached to the thread's last turn (the same
// messageId again), that turn's task, named by its first run.
func (c *a2aCall) turnTask(ctx context.Context, threadID string, run *engine.Run) (string, error) {
	if _, _, err := c.s.Store.RunThread(ctx, c.p.Tenant, run.ID); err == nil || !errors.Is(err, store.ErrNotFound) {
		return run.ID, err
	}
	if q, err := c.s.Store.QueuedTurn(ctx, c.p.Tenant, run.ID); err == nil && q.ThreadID == threadID {
		return run.ID, nil // a queued follow-up: the run it will start as
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	if _, _, err := c.s.Store.RunThread(ctx, c.p.Tenant, run.ID); err == nil {
		return run.ID, nil // it started meanwhile
	}
	th, err := c.s.Store.GetThread(ctx, c.p.Tenant, threadID)
	if err != nil {
		return "", err
	}
	runs, err := c.s.Store.ListRuns(ctx, c.p.Tenant, threadID)
	if err != nil {
		return "", err
	}
	for _, r := range runs {
		if r.TurnSeq == th.Turn.Seq {
			return r.ID, nil
		}
	}
	return th.RunID, nil
}

func ptr[T any](v T) *T { return &v }

func historyOf(c *a2a.SendMessageConfiguration) *int {
	if c == nil {
		return nil
	}
	return c.HistoryLength
}

// decide answers the pending decisions of task t with the decision data
// parts of m, through the engine's resume (as an AG-UI resume does), under
// the key role rule of every decision.
func (c *a2aCall) decide(ctx context.Context, t *a2aTask, m *a2a.Message) (*engine.Run, error) {
	state := t.tr.State()
	switch {
	case state.Terminal():
		return nil, a2a.Errorf(a2a.CodeUnsupportedOperation, "Task %q is %s: it takes no more messages (send one without taskId, in the same contextId, to go on).",
			m.TaskID, state)
	case !t.current || t.th.Status != store.Waiting:
		return nil, a2a.Errorf(a2a.CodeUnsupportedOperation, "Task %q is still working: wait for it (SubscribeToTask, GetTask) or cancel it (CancelTask).", m.TaskID)
	}
	ds, other := a2a.Decisions(m)
	if len(ds) == 0 || other {
		return nil, a2a.Errorf(a2a.CodeInvalidParams,
			`Task %q waits on a decision: answer with a data part {"decision": "approve" | "reject", "id"?, "message"?, "arguments"?} and nothing else.`, m.TaskID)
	}
	if err := c.p.Allow(ActDecide, "message.parts"); err != nil {
		return nil, err
	}
	pending, err := c.s.Store.ListInterrupts(ctx, c.p.Tenant, store.InterruptFilter{ThreadID: t.th.ID, Status: store.Pending, Limit: store.MaxLimit})
	if err != nil {
		return nil, err
	}
	var answers []engine.Answer
	seen := map[string]bool{}
	for _, d := range ds {
		payload, e := d.Payload()
		if e != nil {
			return nil, e
		}
		matched := false
		for _, it := range pending {
			if (d.ID == "" || d.ID == it.ID) && !seen[it.ID] {
				seen[it.ID], matched = true, true
				answers = append(answers, engine.Answer{InterruptID: it.ID, Payload: payload})
			}
		}
		if !matched {
			return nil, a2a.Errorf(a2a.CodeInvalidParams, "Task %q has no pending decision %q to answer.", m.TaskID, d.ID)
		}
	}
	in := engine.Input{Tenant: c.p.Tenant, Agent: c.spec.Name, Key: c.p.Name, DecidedBy: c.p.Name, ThreadID: t.th.ID,
		User: c.p.ToolUser(), AnyOwner: c.p.AnyOwner()}
	return c.s.Runner.ResumeDecisions(ctx, in, A2AVia, answers)
}

// stream writes a task's stream: the task first, then its status and
// artifact updates as run's events come, until a terminal or interrupted
// state (or the run's end). A client that goes away abandons the run, as
// on every wire; client is false for a passive subscriber. With only, the
// stream is the task alone (an interrupted task's subscription).
func (c *a2aCall) stream(run *engine.Run, tr *a2a.Tracker, client, only bool) error {
	sw := sse.NewBuffered(c.w)
	write := func(sr a2a.StreamResponse) error {
		var v any = a2a.Result(c.id, sr)
		if c.rest {
			v = sr
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return sw.Data(b)
	}
	if client {
		stop := context.AfterFunc(c.r.Context(), run.Abandon)
		defer stop()
	} else {
		defer run.Abandon()
	}
	stopPing := c.s.KeepAlive(func() { _ = sw.Comment("keepalive") })
	defer stopPing()
	if err := write(a2a.StreamResponse{Task: ptr(tr.Task(nil, true))}); err != nil {
		return nil
	}
	_ = sw.Flush()
	if only {
		return nil
	}
	for e := range run.Events() {
		for _, sr := range tr.Apply(e) {
			if err := write(sr); err != nil {
				return nil // client gone; a durable run goes on
			}
		}
		if run.Buffered() == 0 {
			if err := sw.Flush(); err != nil {
				return nil
			}
		}
		if st := tr.State(); st.Terminal() || st.Interrupted() {
			break
		}
	}
	if st := tr.State(); !st.Terminal() && !st.Interrupted() {
		e := a2aErrorOf(apierror.IncompleteRun())
		if c.rest {
			b, _ := json.Marshal(e.StatusBody())
			_ = sw.Event("error", b)
		} else {
			b, _ := json.Marshal(a2a.ErrorResponse(c.id, e))
			_ = sw.Data(b)
		}
	}
	return sw.Flush()
}

// getTask is GetTask.
func (c *a2aCall) getTask(params json.RawMessage) error {
	var req a2a.GetTaskRequest
	if e := a2a.DecodeParams(params, &req); e != nil {
		return e
	}
	t, err := c.task(c.r.Context(), req.ID)
	if err != nil {
		return err
	}
	return c.result(t.tr.Task(req.HistoryLength, true))
}

// cancelTask is CancelTask: the task's running turn is stopped as POST
// /v1/threads/{id}/cancel stops it (waiting until it stopped), and the
// task is answered as it is then; an INPUT_REQUIRED task's turn is
// cancelled without running anything (engine.CancelWaiting: its decisions
// close as cancelled, its calls do not run) and answered CANCELED; a task
// in a terminal state is TaskNotCancelable.
func (c *a2aCall) cancelTask(params json.RawMessage) error {
	var req a2a.GetTaskRequest
	if e := a2a.DecodeParams(params, &req); e != nil {
		return e
	}
	if err := c.p.Allow(ActTurn, ""); err != nil {
		return err
	}
	ctx := c.r.Context()
	t, err := c.task(ctx, req.ID)
	if err != nil {
		return err
	}
	if t.queued {
		// A queued turn leaves the queue before it starts: CANCELED.
		removed, err := c.s.Runner.Unqueue(ctx, c.p.Tenant, t.th.ID, req.ID)
		if err != nil {
			return err
		}
		if removed {
			t.tr.SetState(a2a.StateCanceled)
			return c.result(t.tr.Task(nil, true))
		}
		if t, err = c.task(ctx, req.ID); err != nil { // it started meanwhile
			return err
		}
	}
	if t.current && (t.tr.State().Interrupted() || t.th.Status == store.Waiting || t.th.Status == store.Queued) {
		// Waiting on decisions (or its resume due): the turn ends without
		// running anything, its decisions closed as cancelled.
		cancelled, err := c.s.Runner.CancelWaiting(ctx, c.p.Tenant, t.th.ID, c.p.Name)
		if err != nil {
			return err
		}
		if t, err = c.task(ctx, req.ID); err != nil {
			return err
		}
		if cancelled {
			return c.result(t.tr.Task(nil, true))
		}
		// Not cancelled: a resume took the turn meanwhile; it is stopped
		// as any working task is.
	}
	if !t.current || t.th.Status != store.Running {
		return a2a.Errorf(a2a.CodeTaskNotCancelable, "Task %q is %s: only a working task can be canceled.", req.ID, t.tr.State())
	}
	stopped, err := c.s.Runner.Stop(ctx, c.p.Tenant, t.th.ID)
	if err != nil {
		return err
	}
	if !stopped {
		c.s.Logger.WarnContext(ctx, "a2a cancel: the run did not stop in time", "thread", t.th.ID, "task", req.ID, "wait", engine.StopWait)
	}
	if t, err = c.task(ctx, req.ID); err != nil {
		return err
	}
	return c.result(t.tr.Task(nil, true))
}

// subscribe is SubscribeToTask: the task as it is now, then its updates
// live (from the events stored after those it was read from) to a terminal
// or interrupted state. A task in a terminal state is UnsupportedOperation;
// an INPUT_REQUIRED one gets its task and the stream ends.
func (c *a2aCall) subscribe(params json.RawMessage) error {
	var req a2a.GetTaskRequest
	if e := a2a.DecodeParams(params, &req); e != nil {
		return e
	}
	ctx := c.r.Context()
	t, err := c.task(ctx, req.ID)
	if err != nil {
		return err
	}
	if st := t.tr.State(); st.Terminal() {
		return a2a.Errorf(a2a.CodeUnsupportedOperation, "Task %q is %s: there is nothing more to subscribe to (GetTask reads it).", req.ID, st)
	}
	if t.queued {
		// Not started: the task as it is, and the stream ends (subscribe
		// again once it works, or poll GetTask).
		return c.streamTask(t.tr)
	}
	from := t.turnSeq
	if t.lastSeq >= from {
		from = t.lastSeq + 1
	}
	client := c.p.Allow(ActTurn, "") == nil
	run, err := c.s.Runner.FollowTurn(ctx, engine.FollowTurn{Tenant: c.p.Tenant, ThreadID: t.th.ID, From: from, Client: client})
	if err != nil {
		return err
	}
	if t.tr.State().Interrupted() {
		return c.stream(run, t.tr, false, true)
	}
	return c.stream(run, t.tr, client, false)
}

// listTasks is ListTasks: the tasks of a context (a thread's turns), newest
// first, by pages of pageSize (default 50, at most 100); without a
// contextId, the latest task of each of the agent's most recent threads.
func (c *a2aCall) listTasks(params json.RawMessage) error {
	var req a2a.ListTasksRequest
	if e := a2a.DecodeParams(params, &req); e != nil {
		return e
	}
	size := 50
	if req.PageSize != nil {
		if *req.PageSize < 1 || *req.PageSize > 100 {
			return &a2a.Error{Code: a2a.CodeInvalidParams, Message: "pageSize must be between 1 and 100.",
				Details: []any{map[string]any{"@type": "type.googleapis.com/google.rpc.BadRequest",
					"fieldViolations": []map[string]string{{"field": "pageSize", "description": "must be between 1 and 100"}}}}}
		}
		size = *req.PageSize
	}
	if req.HistoryLength != nil && *req.HistoryLength < 0 {
		return a2a.Errorf(a2a.CodeInvalidParams, "historyLength must not be negative.")
	}
	before := int64(0)
	if req.PageToken != "" {
		n, err := strconv.ParseInt(req.PageToken, 10, 64)
		if err != nil || n <= 0 {
			return a2a.Errorf(a2a.CodeInvalidParams, "Invalid pageToken %q.", req.PageToken)
		}
		before = n
	}
	ctx := c.r.Context()
	var all []a2aListed
	if req.ContextID != "" {
		th, err := c.s.Store.GetThread(ctx, c.p.Tenant, req.ContextID)
		if err == nil && th.Agent == c.spec.Name && c.p.Sees(th.Owner) {
			if all, err = c.threadTasks(ctx, th); err != nil {
				return err
			}
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	} else {
		ths, err := c.s.Store.ListThreads(ctx, c.p.Tenant, store.ThreadFilter{Agent: c.spec.Name, Limit: 100,
			Scoped: !c.p.AnyOwner(), User: c.p.User.ID})
		if err != nil {
			return err
		}
		for i := range ths {
			ts, err := c.threadTasks(ctx, &ths[i])
			if err != nil {
				return err
			}
			if len(ts) > 0 {
				l := ts[0]
				l.order = int64(len(ths) - i)
				all = append(all, l)
			}
		}
	}
	switch req.Status {
	case "TASK_STATE_UNSPECIFIED", "UNRECOGNIZED":
		// No filter: @a2a-js/sdk 1.3 sends "UNRECOGNIZED" for a status
		// left unset.
		req.Status = ""
	case "", a2a.StateSubmitted, a2a.StateWorking, a2a.StateCompleted, a2a.StateFailed, a2a.StateCanceled,
		a2a.StateInputRequired, a2a.StateRejected, a2a.StateAuthRequired:
	default:
		return a2a.Errorf(a2a.CodeInvalidParams, "Unknown task state %q.", req.Status)
	}
	var kept []a2aListed
	for _, l := range all {
		if req.Status != "" && l.task.Status.State != req.Status {
			continue
		}
		kept = append(kept, l)
	}
	out := a2aPage{ListTasksResponse: a2a.ListTasksResponse{Tasks: []a2a.Task{}, TotalSize: len(kept)}}
	for _, l := range kept {
		if before > 0 && l.order >= before {
			continue
		}
		if len(out.Tasks) == size {
			out.NextPageToken = strconv.FormatInt(out.lastOrder, 10)
			break
		}
		task := l.task
		if !req.IncludeArtifacts {
			task.Artifacts = nil
		}
		if req.HistoryLength != nil {
			if n := *req.HistoryLength; len(task.History) > n {
				task.History = task.History[len(task.History)-n:]
			}
			if len(task.History) == 0 {
				task.History = nil
			}
		}
		out.Tasks = append(out.Tasks, task)
		out.lastOrder = l.order
	}
	out.PageSize = len(out.Tasks)
	return c.result(out.ListTasksResponse)
}

// queuedOrder places queued turns after every turn that began in a
// listing (a turn's order is its first event's sequence number).
const queuedOrder = int64(1) << 50

// a2aListed is a task of a listing and its place (higher: newer).
type a2aListed struct {
	task  a2a.Task
	order int64
}

// a2aPage is a listing being paged.
type a2aPage struct {
	a2a.ListTasksResponse
	lastOrder int64
}

// threadTasks are the tasks of a thread (one per turn, named by its first
// run), newest first, folded from one replay of the thread's events.
func (c *a2aCall) threadTasks(ctx context.Context, th *store.Thread) ([]a2aListed, error) {
	runs, err := c.s.Store.ListRuns(ctx, th.Tenant, th.ID)
	if err != nil {
		return nil, err
	}
	type turn struct {
		seq int64
		id  string
	}
	var turns []turn
	for _, r := range runs {
		if r.TurnSeq > 0 && !slices.ContainsFunc(turns, func(t turn) bool { return t.seq == r.TurnSeq }) {
			turns = append(turns, turn{r.TurnSeq, r.ID})
		}
	}
	if th.Turn.Seq > 0 && th.RunID != "" && !slices.ContainsFunc(turns, func(t turn) bool { return t.seq == th.Turn.Seq }) {
		turns = append(turns, turn{th.Turn.Seq, th.RunID})
	}
	slices.SortFunc(turns, func(a, b turn) int { return int(a.seq - b.seq) })
	if len(turns) == 0 {
		return nil, nil
	}
	trs := make([]*a2a.Tracker, len(turns))
	for i, t := range turns {
		trs[i] = a2a.NewTracker(t.id, th.ID, c.s.Now)
	}
	cur := -1
	for e, err := range c.s.Runner.Replay(ctx, th.Tenant, th.ID, turns[0].seq, 0) {
		if err != nil {
			return nil, err
		}
		for e.Seq > 0 && cur+1 < len(turns) && e.Seq >= turns[cur+1].seq {
			cur++
		}
		if cur >= 0 {
			trs[cur].Apply(e)
		}
	}
	if last := trs[len(trs)-1]; th.Status == store.Running || th.Status == store.Queued {
		last.SetState(a2a.StateWorking)
	}
	out := make([]a2aListed, 0, len(turns))
	// Follow-ups waiting in the thread's queue come first: SUBMITTED, the
	// last queued newest, ordered after every turn that began.
	queue, err := c.s.Store.Queue(ctx, th.Tenant, th.ID)
	if err != nil {
		return nil, err
	}
	for i := len(queue) - 1; i >= 0; i-- {
		q := queue[i]
		tr := a2a.NewTracker(q.ID, th.ID, func() time.Time { return q.CreatedAt })
		out = append(out, a2aListed{task: tr.Task(nil, true), order: queuedOrder + q.Seq})
	}
	for i := len(turns) - 1; i >= 0; i-- {
		out = append(out, a2aListed{task: trs[i].Task(nil, true), order: turns[i].seq})
	}
	return out, nil
}
