package tsload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// location is a call site in agent code.
type location struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// description is the JSON projection prelude.js register() returns.
type description struct {
	Name         string `json:"name"`
	Model        string `json:"model"`
	Instructions string `json:"instructions"`
	// InstructionsFn: instructions is a function, called before each step.
	InstructionsFn bool   `json:"instructionsFn"`
	Description    string `json:"description"`
	MaxSteps       int    `json:"maxSteps"`
	// ContextWindow (tokens, 0: the model's known window) and
	// ContextPolicy ("", "trim" or "summarize") are contextWindow and contextPolicy.
	ContextWindow int    `json:"contextWindow"`
	ContextPolicy string `json:"contextPolicy"`
	// Multitask is multitask ("": reject).
	Multitask string `json:"multitask"`
	// ApprovalMode is approvalMode ("", "pause" or "wait").
	ApprovalMode string `json:"approvalMode"`
	// MaxToolResultBytes is maxToolResultBytes (0: the default cap).
	MaxToolResultBytes int `json:"maxToolResultBytes"`
	// ModelTimeoutMs and ModelIdleTimeoutMs are modelSettings.timeout and
	// .idleTimeout in milliseconds (0: the server's default).
	ModelTimeoutMs     int64 `json:"modelTimeoutMs"`
	ModelIdleTimeoutMs int64 `json:"modelIdleTimeoutMs"`
	// ModelSettings are modelSettings' sampling fields (null: none).
	ModelSettings   *model.Settings            `json:"modelSettings"`
	ClientOverrides []string                   `json:"clientOverrides"`
	NoTodos         bool                       `json:"noTodos"`
	NoFiles         bool                       `json:"noFiles"`
	EditableState   map[string]json.RawMessage `json:"editableState"`
	Tools           []toolDescription          `json:"tools"`
	Subagents       []agent.Subagent           `json:"subagents"`
	MCPServers      []mcpServerDescription     `json:"mcpServers"`
	A2AAgents       []a2aAgentDescription      `json:"a2aAgents"`
	// Output is the JSON Schema of the agent's final answer (null: none).
	Output json.RawMessage `json:"output"`
	// Env lists the environment variables tools may read as ctx.env.
	Env []string  `json:"env"`
	Loc *location `json:"loc"`
	// ModelFallbacks are the models after the first of a model array.
	ModelFallbacks []string `json:"modelFallbacks"`
	// Schedules are schedules, defaults filled in.
	Schedules []agent.Schedule `json:"schedules"`
	// Memory is memory (null: off; a null namespace: the default).
	Memory *agent.Memory `json:"memory"`
}

// approvalDescription is a needsApproval value as prelude.js describes it.
type approvalDescription struct {
	When             bool     `json:"when"`
	Description      string   `json:"description"`
	DescriptionFn    bool     `json:"descriptionFn"`
	AllowedDecisions []string `json:"allowedDecisions"`
	// ExpiresAfterMs is needsApproval.expiresAfter in milliseconds (0: the
	// server's default).
	ExpiresAfterMs int64 `json:"expiresAfterMs"`
	// Approvals is needsApproval.approvals, the quorum (0: one).
	Approvals int `json:"approvals"`
}

type mcpServerDescription struct {
	Name    string            `json:"name"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	// MaxResultBytes is maxResultBytes (0: the agent's cap).
	MaxResultBytes int `json:"maxResultBytes"`
	// Tools is tools: include (null: all), exclude, rename.
	Tools struct {
		Include []string          `json:"include"`
		Exclude []string          `json:"exclude"`
		Rename  map[string]string `json:"rename"`
	} `json:"tools"`
	Approval struct {
		Mode string `json:"mode"`
		// Tools is the object form; a null value means no approval.
		Tools map[string]*approvalDescription `json:"tools"`
	} `json:"approval"`
}

type a2aAgentDescription struct {
	Name        string            `json:"name"`
	URL         string            `json:"url"`
	Headers     map[string]string `json:"headers"`
	Description string            `json:"description"`
}

type toolDescription struct {
	Name        string               `json:"name"`
	Description string               `json:"description"`
	Parameters  json.RawMessage      `json:"parameters"`
	Approval    *approvalDescription `json:"approval"`
	TimeoutMs   float64              `json:"timeoutMs"`
	Idempotent  bool                 `json:"idempotent"`
	Loc         *location            `json:"loc"`
}

// locErr returns a *LoadError at the defineDeepAgent call site.
func (d *description) locErr(file, msg string) *LoadError {
	le := &LoadError{File: file, Message: msg}
	if d != nil && d.Loc != nil && d.Loc.File != "" {
		le.File, le.Line, le.Col = d.Loc.File, d.Loc.Line, d.Loc.Col
	}
	return le
}

// newAgent evaluates a bundle in its first runtime and builds the Spec.
func newAgent(ctx context.Context, root string, b *bundle, opts Options) (*agent.Spec, *description, error) {
	start := time.Now()
	sh := &shared{rel: b.rel, prog: b.prog, opts: opts, log: opts.Logger}
	first, err := newRuntime(ctx, sh)
	if err != nil {
		return nil, nil, err
	}
	var d description
	if err := json.Unmarshal([]byte(sh.desc), &d); err != nil {
		return nil, nil, &LoadError{File: b.rel, Message: "cannot read agent config: " + err.Error()}
	}
	sh.name = d.Name
	a := &jsAgent{sh: sh, pool: newPool(sh, opts.PoolSize, first)}
	a.readEnv(d.Env, opts.LookupEnv)
	spec := &agent.Spec{
		Name:               d.Name,
		Model:              d.Model,
		Fallbacks:          d.ModelFallbacks,
		Instructions:       d.Instructions,
		Subagents:          d.Subagents,
		EditableState:      d.EditableState,
		MaxSteps:           d.MaxSteps,
		ContextWindow:      d.ContextWindow,
		ContextPolicy:      d.ContextPolicy,
		Multitask:          d.Multitask,
		ApprovalMode:       d.ApprovalMode,
		Schedules:          d.Schedules,
		Memory:             d.Memory,
		MaxToolResultBytes: d.MaxToolResultBytes,
		ModelTimeouts: model.Timeouts{Call: time.Duration(d.ModelTimeoutMs) * time.Millisecond,
			Idle: time.Duration(d.ModelIdleTimeoutMs) * time.Millisecond},
		ClientOverrides: d.ClientOverrides,
		NoTodos:         d.NoTodos,
		NoFiles:         d.NoFiles,
		Dir:             root,
		Source:          b.abs,
		Close:           a.pool.close,
	}
	if d.ModelSettings != nil {
		spec.ModelSettings = *d.ModelSettings
	}
	if d.InstructionsFn {
		spec.InstructionsFn = a.instructions
	}
	spec.Description = d.Description
	if len(d.Output) > 0 && string(d.Output) != "null" {
		spec.Output = d.Output
	}
	if spec.EditableState == nil {
		spec.EditableState = map[string]json.RawMessage{}
	}
	if d.Memory != nil && d.Memory.Namespace != nil {
		if err := store.CheckNamespace("memory.namespace", d.Memory.Namespace, false); err != nil {
			a.pool.close()
			return nil, nil, d.locErr(b.rel, "agent "+d.Name+": "+err.Error())
		}
	}
	for _, td := range d.Tools {
		spec.Tools = append(spec.Tools, a.tool(td))
	}
	// The values ${VAR} references expand to are secrets too.
	var expanded []string
	lookup := func(name string) (string, bool) {
		v, ok := opts.LookupEnv(name)
		if ok {
			expanded = append(expanded, v)
		}
		return v, ok
	}
	for _, md := range d.MCPServers {
		srv, err := a.mcpServer(md, lookup)
		if err != nil {
			a.pool.close()
			return nil, nil, d.locErr(b.rel, err.Error())
		}
		spec.MCPServers = append(spec.MCPServers, srv)
		// Header and env values are secrets whatever their source (a
		// literal token in the agent file too), and so are the URL's
		// credentials (user info, query values, long path segments):
		// connect errors quote the URL.
		expanded = append(expanded, redact.URLSecrets(srv.URL)...)
		for _, v := range srv.Headers {
			expanded = append(expanded, v)
		}
		for _, v := range srv.Env {
			expanded = append(expanded, v)
		}
	}
	for _, ad := range d.A2AAgents {
		headers, err := expandAll(ad.Headers, "a2aAgents."+ad.Name+".headers", lookup)
		if err != nil {
			a.pool.close()
			return nil, nil, d.locErr(b.rel, err.Error())
		}
		spec.A2AAgents = append(spec.A2AAgents, agent.A2AAgent{Name: ad.Name, URL: ad.URL, Headers: headers, Description: ad.Description})
		// As for MCP: header values and the URL's credentials are secrets
		// (but not the path segments that name the agent, /a2a/{agent}).
		expanded = append(expanded, a2aURLSecrets(ad.URL)...)
		for _, v := range headers {
			expanded = append(expanded, v)
		}
	}
	a.addSecrets(expanded...)
	spec.Secrets = slices.Clone(a.secrets)
	opts.Logger.Debug("loaded agent", "agent", d.Name, "file", b.rel, "bundle_bytes", b.size,
		"tools", len(spec.Tools), "took", time.Since(start))
	return spec, &d, nil
}

// a2aTokenLen is how long a path segment of an A2A agent's URL must be to
// be taken for a credential: A2A URLs name agents in their paths
// (/a2a/research), which must stay readable in logs and errors.
const a2aTokenLen = 24

// a2aURLSecrets is redact.URLSecrets for an A2A agent's URL: user info and
// query values, and only the path segments long enough to be tokens.
func a2aURLSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	path := map[string]bool{}
	for _, seg := range strings.Split(u.Path, "/") {
		path[seg] = true
	}
	for _, v := range redact.URLSecrets(raw) {
		if !path[v] || len(v) >= a2aTokenLen {
			out = append(out, v)
		}
	}
	return out
}

// jsAgent runs one agent's JS through its runtime pool.
type jsAgent struct {
	sh   *shared
	pool *pool
	// env is what tools read as ctx.env: the listed names that are set.
	env map[string]string
	// red removes env's values (and ${VAR} values of mcpServers) from what
	// leaves the agent's code: results, state, errors, console output.
	red     *redact.Redactor
	secrets []string
}

// readEnv resolves the agent's env names once per load (a reload reads them
// again). A listed name set nowhere is undefined in ctx.env and logged as a
// warning (by name). The values become secrets of the agent's logger.
func (a *jsAgent) readEnv(names []string, lookup func(string) (string, bool)) {
	a.env = map[string]string{}
	var missing []string
	for _, n := range names {
		if v, ok := lookup(n); ok {
			a.env[n] = v
		} else {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		a.sh.log.Warn("agent env: not set in the environment nor in .env; ctx.env has them undefined",
			"agent", a.sh.name, "names", missing)
	}
	a.addSecrets(slices.Collect(maps.Values(a.env))...)
}

// addSecrets adds values to redact; the agent's logger redacts them too.
func (a *jsAgent) addSecrets(values ...string) {
	if len(values) == 0 {
		return
	}
	a.secrets = append(a.secrets, values...)
	a.red = redact.New(a.secrets...)
	a.sh.log = slog.New(redact.NewHandler(a.sh.opts.Logger.Handler(), a.red))
}

// redact removes the agent's secrets from s.
func (a *jsAgent) redact(s string) string {
	if a.red == nil {
		return s
	}
	return a.red.String(s)
}

// redactErr removes the agent's secrets from a tool error's message and
// stack before anything stores or logs it.
func (a *jsAgent) redactErr(err error) error {
	if err == nil || a.red == nil {
		return err
	}
	var te *ToolError
	if errors.As(err, &te) {
		te.Message, te.Stack = a.red.String(te.Message), a.red.String(te.Stack)
		return err
	}
	msg := err.Error()
	if red := a.red.String(msg); red != msg {
		return errors.New(red)
	}
	return err
}

func (a *jsAgent) tool(td toolDescription) *tool.Tool {
	t := &tool.Tool{
		Name:        td.Name,
		Description: td.Description,
		Parameters:  td.Parameters,
		Timeout:     time.Duration(td.TimeoutMs * float64(time.Millisecond)),
		Idempotent:  td.Idempotent,
	}
	name := td.Name
	t.Execute = func(ctx context.Context, call tool.Call) (tool.Result, error) {
		return a.execute(ctx, t, call)
	}
	if td.Approval != nil {
		t.Approval = a.approval(name, td.Approval, t.TimeLimit)
	}
	return t
}

// approval builds a tool.Approval from a needsApproval description; key
// names the hooks in the JS host (a tool name, or "mcp:server:tool").
func (a *jsAgent) approval(key string, ap *approvalDescription, limit func() time.Duration) *tool.Approval {
	out := &tool.Approval{ExpiresAfter: time.Duration(ap.ExpiresAfterMs) * time.Millisecond, Approvals: ap.Approvals}
	for _, d := range ap.AllowedDecisions {
		out.AllowedDecisions = append(out.AllowedDecisions, tool.Decision(d))
	}
	if ap.When {
		out.When = func(ctx context.Context, args json.RawMessage) (bool, error) {
			var ok bool
			err := a.run(ctx, key, limit(), func(r *jsRuntime) (goja.Value, error) {
				return r.when(goja.Undefined(), r.vm.ToValue(key), r.vm.ToValue(string(args)))
			}, func(v goja.Value) error {
				ok = v.ToBoolean()
				return nil
			})
			return ok, err
		}
	}
	switch {
	case ap.DescriptionFn:
		out.Description = func(ctx context.Context, args json.RawMessage) (string, error) {
			var text string
			err := a.run(ctx, key, limit(), func(r *jsRuntime) (goja.Value, error) {
				return r.describe(goja.Undefined(), r.vm.ToValue(key), r.vm.ToValue(string(args)))
			}, func(v goja.Value) error {
				text = a.redact(v.String())
				return nil
			})
			return text, err
		}
	case ap.Description != "":
		text := ap.Description
		out.Description = func(context.Context, json.RawMessage) (string, error) { return text, nil }
	}
	return out
}

// instructions evaluates the agent's instructions function on in's state,
// bounded like a tool call (tool.DefaultTimeout).
func (a *jsAgent) instructions(ctx context.Context, in agent.InstructionsInput) (string, error) {
	var text string
	err := a.run(ctx, "instructions", tool.DefaultTimeout, func(r *jsRuntime) (goja.Value, error) {
		meta := r.vm.NewObject()
		_ = meta.Set("threadId", in.ThreadID)
		_ = meta.Set("agent", in.Agent)
		return r.instructions(goja.Undefined(), r.vm.ToValue(string(in.State)), meta)
	}, func(v goja.Value) error {
		text = v.String()
		return nil
	})
	return text, err
}

// mcpServer builds an agent.MCPServer, expanding ${VAR} references in header
// and env values.
func (a *jsAgent) mcpServer(md mcpServerDescription, lookup func(string) (string, bool)) (agent.MCPServer, error) {
	srv := agent.MCPServer{Name: md.Name, URL: md.URL, Command: md.Command, Args: md.Args,
		Approval: agent.MCPApproval{Mode: md.Approval.Mode}, MaxResultBytes: md.MaxResultBytes,
		Tools: agent.MCPToolFilter{Include: md.Tools.Include, Exclude: md.Tools.Exclude, Rename: md.Tools.Rename}}
	var err error
	if srv.Headers, err = expandAll(md.Headers, "mcpServers."+md.Name+".headers", lookup); err != nil {
		return srv, err
	}
	if srv.Env, err = expandAll(md.Env, "mcpServers."+md.Name+".env", lookup); err != nil {
		return srv, err
	}
	if md.Approval.Tools != nil {
		srv.Approval.Tools = map[string]*tool.Approval{}
		for name, ap := range md.Approval.Tools {
			if ap == nil {
				srv.Approval.Tools[name] = nil
				continue
			}
			srv.Approval.Tools[name] = a.approval("mcp:"+md.Name+":"+name, ap, func() time.Duration { return tool.DefaultTimeout })
		}
	}
	return srv, nil
}

// expandAll replaces every ${VAR} in m's values with the variable's value;
// an unset variable is an error naming it (and the field), never the value.
func expandAll(m map[string]string, field string, lookup func(string) (string, bool)) (map[string]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var missing string
		out[k], missing = config.ExpandRefs(v, lookup)
		if missing != "" {
			return nil, fmt.Errorf("%s.%s: environment variable %s is not set", field, k, missing)
		}
	}
	return out, nil
}

// run takes a runtime from the pool, invokes JS on it and puts it back.
func (a *jsAgent) run(ctx context.Context, label string, limit time.Duration,
	start func(r *jsRuntime) (goja.Value, error), finish func(goja.Value) error) error {
	r, err := a.pool.get(ctx)
	if err != nil {
		return fmt.Errorf("tool %q: %w", label, err)
	}
	defer a.pool.put(r)
	err = a.redactErr(r.invoke(ctx, label, limit, func() (goja.Value, error) { return start(r) }, finish))
	if te, ok := err.(*ToolError); ok {
		if te.Name == "ToolArgumentsError" {
			a.sh.log.Debug("tool arguments rejected", "agent", a.sh.name, "tool", label, "error", te.Message)
		} else {
			a.sh.log.Warn("agent code threw", "agent", a.sh.name, "tool", label,
				"error", te.Error(), "stack", te.Stack)
		}
	} else if err != nil {
		a.sh.log.Warn("tool call failed", "agent", a.sh.name, "tool", label, "error", err)
	}
	return err
}

func (a *jsAgent) execute(ctx context.Context, t *tool.Tool, call tool.Call) (tool.Result, error) {
	var (
		res tool.Result
		rt  *jsRuntime
	)
	err := a.run(ctx, t.Name, t.TimeLimit(), func(r *jsRuntime) (goja.Value, error) {
		rt = r
		r.cur.mem = call.Store
		if r.env == nil {
			r.env = r.vm.NewObject()
			for k, v := range a.env {
				_ = r.env.Set(k, v)
			}
		}
		vm := r.vm
		user := goja.Null()
		if call.User != nil {
			user = vm.ToValue(call.User.ID + "\x00" + call.User.Label)
		}
		v, err := r.call(goja.Undefined(), vm.ToValue(t.Name), vm.ToValue(string(call.Args)), vm.ToValue(string(call.State)),
			vm.ToValue(call.ThreadID), vm.ToValue(call.ToolCallID), vm.ToValue(call.IdempotencyKey), vm.ToValue(call.Agent), r.env, user)
		return v, r.jsError(err)
	}, func(v goja.Value) error {
		v, err := rt.finishCall(goja.Undefined(), v)
		if err != nil {
			return rt.jsError(err)
		}
		o, ok := v.(*goja.Object)
		if !ok {
			return fmt.Errorf("tool %q: unexpected result from the JS host", t.Name)
		}
		res.Content = a.redact(o.Get("content").String())
		if s := o.Get("state"); s != nil && !goja.IsNull(s) && !goja.IsUndefined(s) {
			res.State = json.RawMessage(a.redact(s.String()))
		}
		return nil
	})
	return res, err
}
