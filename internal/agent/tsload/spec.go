package tsload

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dop251/goja"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/model"
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
	Description  string `json:"description"`
	MaxSteps     int    `json:"maxSteps"`
	// ModelTimeoutMs and ModelIdleTimeoutMs are modelSettings.timeout and
	// .idleTimeout in milliseconds (0: the server's default).
	ModelTimeoutMs     int64                      `json:"modelTimeoutMs"`
	ModelIdleTimeoutMs int64                      `json:"modelIdleTimeoutMs"`
	NoTodos            bool                       `json:"noTodos"`
	NoFiles            bool                       `json:"noFiles"`
	EditableState      map[string]json.RawMessage `json:"editableState"`
	Tools              []toolDescription          `json:"tools"`
	Subagents          []agent.Subagent           `json:"subagents"`
	Loc                *location                  `json:"loc"`
}

type toolDescription struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Approval    *struct {
		When             bool     `json:"when"`
		Description      string   `json:"description"`
		DescriptionFn    bool     `json:"descriptionFn"`
		AllowedDecisions []string `json:"allowedDecisions"`
	} `json:"approval"`
	TimeoutMs  float64   `json:"timeoutMs"`
	Idempotent bool      `json:"idempotent"`
	Loc        *location `json:"loc"`
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
	spec := &agent.Spec{
		Name:          d.Name,
		Model:         d.Model,
		Instructions:  d.Instructions,
		Subagents:     d.Subagents,
		EditableState: d.EditableState,
		MaxSteps:      d.MaxSteps,
		ModelTimeouts: model.Timeouts{Call: time.Duration(d.ModelTimeoutMs) * time.Millisecond,
			Idle: time.Duration(d.ModelIdleTimeoutMs) * time.Millisecond},
		NoTodos: d.NoTodos,
		NoFiles: d.NoFiles,
		Dir:     root,
		Source:  b.abs,
		Close:   a.pool.close,
	}
	spec.Description = d.Description
	if spec.EditableState == nil {
		spec.EditableState = map[string]json.RawMessage{}
	}
	for _, td := range d.Tools {
		spec.Tools = append(spec.Tools, a.tool(td))
	}
	opts.Logger.Debug("loaded agent", "agent", d.Name, "file", b.rel, "bundle_bytes", b.size,
		"tools", len(spec.Tools), "took", time.Since(start))
	return spec, &d, nil
}

// jsAgent runs one agent's JS through its runtime pool.
type jsAgent struct {
	sh   *shared
	pool *pool
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
	if ap := td.Approval; ap != nil {
		t.Approval = &tool.Approval{}
		for _, d := range ap.AllowedDecisions {
			t.Approval.AllowedDecisions = append(t.Approval.AllowedDecisions, tool.Decision(d))
		}
		if ap.When {
			t.Approval.When = func(ctx context.Context, args json.RawMessage) (bool, error) {
				var out bool
				err := a.run(ctx, name, t.TimeLimit(), func(r *jsRuntime) (goja.Value, error) {
					return r.when(goja.Undefined(), r.vm.ToValue(name), r.vm.ToValue(string(args)))
				}, func(v goja.Value) error {
					out = v.ToBoolean()
					return nil
				})
				return out, err
			}
		}
		switch {
		case ap.DescriptionFn:
			t.Approval.Description = func(ctx context.Context, args json.RawMessage) (string, error) {
				var out string
				err := a.run(ctx, name, t.TimeLimit(), func(r *jsRuntime) (goja.Value, error) {
					return r.describe(goja.Undefined(), r.vm.ToValue(name), r.vm.ToValue(string(args)))
				}, func(v goja.Value) error {
					out = v.String()
					return nil
				})
				return out, err
			}
		case ap.Description != "":
			text := ap.Description
			t.Approval.Description = func(context.Context, json.RawMessage) (string, error) { return text, nil }
		}
	}
	return t
}

// run takes a runtime from the pool, invokes JS on it and puts it back.
func (a *jsAgent) run(ctx context.Context, label string, limit time.Duration,
	start func(r *jsRuntime) (goja.Value, error), finish func(goja.Value) error) error {
	r, err := a.pool.get(ctx)
	if err != nil {
		return fmt.Errorf("tool %q: %w", label, err)
	}
	defer a.pool.put(r)
	err = r.invoke(ctx, label, limit, func() (goja.Value, error) { return start(r) }, finish)
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
	var res tool.Result
	err := a.run(ctx, t.Name, t.TimeLimit(), func(r *jsRuntime) (goja.Value, error) {
		meta := r.vm.NewObject()
		_ = meta.Set("threadId", call.ThreadID)
		_ = meta.Set("toolCallId", call.ToolCallID)
		_ = meta.Set("idempotencyKey", call.IdempotencyKey)
		_ = meta.Set("agent", call.Agent)
		return r.call(goja.Undefined(), r.vm.ToValue(t.Name), r.vm.ToValue(string(call.Args)),
			r.vm.ToValue(string(call.State)), meta)
	}, func(v goja.Value) error {
		o, ok := v.(*goja.Object)
		if !ok {
			return fmt.Errorf("tool %q: unexpected result from the JS host", t.Name)
		}
		res.Content = o.Get("content").String()
		if s := o.Get("state"); s != nil && !goja.IsNull(s) && !goja.IsUndefined(s) {
			res.State = json.RawMessage(s.String())
		}
		return nil
	})
	return res, err
}
