package tsload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/stackbone/stackbone/internal/tool"
)

// maxCallStack bounds JS recursion so runaway recursion is an error, not a
// Go stack overflow.
const maxCallStack = 4096

// errInterrupted is the value a runtime is interrupted with when its call's
// context ends.
var errInterrupted = errors.New("tsload: interrupted")

// errNoPending is returned when a promise can never settle.
var errNoPending = errors.New("the promise never settles: nothing (timer or fetch) is pending")

// shared is what all runtimes of one agent have in common.
type shared struct {
	name string // agent name, once known
	rel  string // file relative to the project folder
	prog *goja.Program
	opts Options
	log  *slog.Logger
	desc string // the description JSON of the first runtime
	// hook is set for the project's auth.ts: its runtimes find
	// authenticate instead of registering an agent.
	hook bool
}

// jsRuntime is one goja runtime with the agent module evaluated in it. It is
// used by one goroutine at a time (the pool hands it out).
type jsRuntime struct {
	vm *goja.Runtime
	sh *shared

	register, call, finishCall, when, describe goja.Callable
	instructions                               goja.Callable
	// authenticate is auth.ts's export (a hook runtime only).
	authenticate goja.Callable

	// env is the object of the agent's env values handed to every tool
	// call (the prelude freezes a copy once), made on the first call.
	env *goja.Object

	cur      *callState // the call in progress, nil between calls
	nextID   int64
	poisoned bool // interrupted or timed out: never reuse (goja bug)
}

// callState is one host call into JS. Host operations started during the call
// post their completions on jobs; they give up once done is closed. Both
// channels and timers are nil until the call starts one (pending).
type callState struct {
	ctx      context.Context
	label    string // tool name for logs
	jobs     chan func() error
	done     chan struct{}
	inflight int
	timers   map[int64]*jsTimer
	// mem is the memory store of the tool call (ctx.store; nil: none).
	mem tool.Memory
}

// pending readies cs for a host operation that completes later (a timer,
// a fetch): its goroutine posts on jobs until done is closed. Most calls
// start none, so the channels are made on first use.
func (cs *callState) pending() {
	if cs.jobs == nil {
		cs.jobs = make(chan func() error)
		cs.done = make(chan struct{})
		cs.timers = map[int64]*jsTimer{}
	}
}

// newRuntime creates a runtime, runs the prelude and evaluates the agent
// module, bounded by ctx and the eval timeout.
func newRuntime(ctx context.Context, sh *shared) (*jsRuntime, error) {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStack)
	r := &jsRuntime{vm: vm, sh: sh}

	fnVal, err := vm.RunProgram(preludeProgram)
	if err != nil {
		return nil, fmt.Errorf("tsload: prelude: %w", err)
	}
	fn, _ := goja.AssertFunction(fnVal)
	apiVal, err := fn(goja.Undefined(), r.hostObject())
	if err != nil {
		return nil, fmt.Errorf("tsload: prelude: %w", err)
	}
	apiObj := apiVal.ToObject(vm)
	for name, dst := range map[string]*goja.Callable{
		"register": &r.register, "call": &r.call, "finishCall": &r.finishCall,
		"approvalWhen": &r.when, "approvalDescription": &r.describe,
		"instructions": &r.instructions,
	} {
		f, ok := goja.AssertFunction(apiObj.Get(name))
		if !ok {
			return nil, fmt.Errorf("tsload: prelude lacks %s", name)
		}
		*dst = f
	}

	ectx, cancel := context.WithTimeout(ctx, sh.opts.EvalTimeout)
	defer cancel()
	var desc string
	err = r.guard(ectx, func() error {
		if _, err := vm.RunProgram(sh.prog); err != nil {
			return err
		}
		if sh.hook {
			f, err := r.findAuthenticate()
			r.authenticate, desc = f, "auth"
			return err
		}
		v, err := r.register(goja.Undefined(), vm.Get("__agent"))
		if err != nil {
			return err
		}
		desc = v.String()
		return nil
	})
	if err != nil {
		if ectx.Err() != nil && ctx.Err() == nil {
			return nil, &LoadError{File: sh.rel, Message: fmt.Sprintf("evaluating the module took longer than %s", sh.opts.EvalTimeout)}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, r.evalError(err)
	}
	if sh.desc == "" {
		sh.desc = desc
	} else if desc != sh.desc {
		sh.log.Warn("agent module evaluated differently in a new runtime; keep module-level code deterministic",
			"agent", sh.name, "file", sh.rel)
	}
	r.cur = nil
	return r, nil
}

// guard runs f with ctx able to interrupt it. If the interrupt fired, the
// runtime is poisoned: goja leaves an interrupted async function's frames on
// its call stack, after which promise jobs never run again.
func (r *jsRuntime) guard(ctx context.Context, f func() error) (err error) {
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		r.vm.Interrupt(errInterrupted)
		close(fired)
	})
	defer func() {
		if !stop() {
			<-fired
			r.poisoned = true
		}
		if p := recover(); p != nil {
			r.poisoned = true
			err = fmt.Errorf("tsload: panic in JS runtime: %v", p)
		}
	}()
	err = f()
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	if errors.As(err, &ie) || errors.As(err, &so) {
		r.poisoned = true
	}
	return err
}

// invoke runs start (which calls into JS) as one call bounded by limit,
// awaits the returned value if it is a promise, and hands the settled value
// to finish. All goja values stay inside; the runtime is idle afterwards.
func (r *jsRuntime) invoke(parent context.Context, label string, limit time.Duration,
	start func() (goja.Value, error), finish func(goja.Value) error) error {
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	cs := &callState{ctx: ctx, label: label}
	r.cur = cs
	defer func() {
		if cs.done != nil {
			close(cs.done)
		}
		for _, t := range cs.timers {
			t.timer.Stop()
		}
		r.cur = nil
	}()
	err := r.guard(ctx, func() error {
		v, err := start()
		if err != nil {
			return err
		}
		v, err = r.await(cs, v)
		if err != nil {
			return err
		}
		return finish(v)
	})
	if err == nil {
		return nil
	}
	if parent.Err() != nil {
		return fmt.Errorf("tool %q: %w", label, context.Cause(parent))
	}
	if ctx.Err() != nil {
		return &TimeoutError{Tool: label, Limit: limit}
	}
	if errors.Is(err, errNoPending) {
		return fmt.Errorf("tool %q: %w", label, err)
	}
	return err
}

// await runs host completions until the promise v settles.
func (r *jsRuntime) await(cs *callState, v goja.Value) (goja.Value, error) {
	p, ok := v.Export().(*goja.Promise)
	if !ok {
		return v, nil
	}
	for {
		switch p.State() {
		case goja.PromiseStateFulfilled:
			return p.Result(), nil
		case goja.PromiseStateRejected:
			return nil, r.thrown(p.Result())
		}
		if cs.inflight == 0 {
			return nil, errNoPending
		}
		select {
		case job := <-cs.jobs:
			if err := job(); err != nil {
				return nil, err
			}
		case <-cs.ctx.Done():
			return nil, context.Cause(cs.ctx)
		}
	}
}

// jsError turns a JS exception thrown synchronously by a host call into
// the *ToolError a rejection with the same value gives; other errors
// (interrupts, stack overflows) pass through.
func (r *jsRuntime) jsError(err error) error {
	if ex, ok := err.(*goja.Exception); ok {
		return r.thrown(ex.Value())
	}
	return err
}

// thrown converts a thrown JS value into a *ToolError.
func (r *jsRuntime) thrown(v goja.Value) *ToolError {
	e := &ToolError{Agent: r.sh.name}
	if r.cur != nil {
		e.Tool = r.cur.label
	}
	if o, ok := v.(*goja.Object); ok && o.ClassName() == "Error" {
		e.Name = jsString(o.Get("name"))
		e.Message = jsString(o.Get("message"))
		e.Stack = cleanStack(jsString(o.Get("stack")))
		return e
	}
	if v == nil {
		e.Message = "undefined"
		return e
	}
	e.Message = v.String()
	if o, ok := v.(*goja.Object); ok && o.ClassName() == "Object" {
		// A thrown plain object: show its JSON rather than "[object Object]".
		if stringify, ok := goja.AssertFunction(r.vm.Get("JSON").ToObject(r.vm).Get("stringify")); ok {
			if j, err := stringify(goja.Undefined(), o); err == nil && !goja.IsUndefined(j) {
				e.Message = j.String()
			}
		}
	}
	return e
}

// evalError turns an error from module evaluation into a *LoadError,
// positioned at the config call site for config errors, else at the first
// frame in user code.
func (r *jsRuntime) evalError(err error) error {
	le := &LoadError{File: r.sh.rel}
	var ex *goja.Exception
	if !errors.As(err, &ex) {
		le.Message = err.Error()
		return le
	}
	v := ex.Value()
	if o, ok := v.(*goja.Object); ok && o.ClassName() == "Error" {
		name := jsString(o.Get("name"))
		le.Message = jsString(o.Get("message"))
		if name != "StackboneConfigError" && name != "" {
			le.Message = name + ": " + le.Message
		}
		if name == "StackboneConfigError" {
			if loc, ok := o.Get("loc").(*goja.Object); ok {
				le.setLoc(loc.Get("file"), loc.Get("line"), loc.Get("col"))
				return le
			}
			return le
		}
	} else if v != nil {
		le.Message = "uncaught " + v.String()
	}
	for _, f := range ex.Stack() {
		p := f.Position()
		if userFrame(p.Filename) {
			le.File, le.Line, le.Col = p.Filename, p.Line, p.Column+1
			break
		}
	}
	return le
}

func (le *LoadError) setLoc(file, line, col goja.Value) {
	if f := jsString(file); f != "" {
		le.File = f
		le.Line = int(line.ToInteger())
		le.Col = int(col.ToInteger())
	}
}

// userFrame reports whether a (source-mapped) file name belongs to agent code
// rather than to the host prelude or the virtual module.
func userFrame(name string) bool {
	return name != "" && !strings.HasPrefix(name, "stackbone:") && name != "<native>"
}

func jsString(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return ""
	}
	return v.String()
}

// stackFrameRE matches "file:line:col(pc)" in a goja stack line.
var stackFrameRE = regexp.MustCompile(`([^\s()]+):(\d+):(\d+)\(\d+\)`)

// cleanStack drops host frames from a goja stack, drops goja's bytecode
// offsets and makes the columns of source-mapped frames 1-based (goja reports
// source map columns 0-based).
func cleanStack(stack string) string {
	lines := strings.Split(strings.TrimRight(stack, "\n"), "\n")
	out := lines[:0]
	for _, l := range lines {
		if strings.Contains(l, "(stackbone:") || strings.Contains(l, " stackbone:") {
			continue
		}
		out = append(out, stackFrameRE.ReplaceAllStringFunc(l, func(m string) string {
			g := stackFrameRE.FindStringSubmatch(m)
			col, _ := strconv.Atoi(g[3])
			if userFrame(g[1]) {
				col++
			}
			return g[1] + ":" + g[2] + ":" + strconv.Itoa(col)
		}))
	}
	return strings.Join(out, "\n")
}
