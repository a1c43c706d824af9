package tsload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dop251/goja"

	"github.com/stackbone/stackbone/internal/auth"
)

// AuthHook is a project's auth.ts: its authenticate(request) run in a pool
// of goja runtimes like an agent's tools (same globals, fetch, timers,
// Promises), each call bounded in time. It implements auth.Hook.
type AuthHook struct {
	sh      *shared
	pool    *pool
	timeout time.Duration
}

var _ auth.Hook = (*AuthHook)(nil)

// LoadAuth loads DIR/auth.ts (auth.HookFile) when there is one: nil and no
// error when there is none. The module must export a function
// authenticate (named, or as a property of the default export, or the
// default export itself). timeout bounds each call
// (auth.DefaultHookTimeout when zero).
func LoadAuth(ctx context.Context, dir string, timeout time.Duration, opts Options) (*AuthHook, error) {
	opts = opts.withDefaults()
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tsload: %w", err)
	}
	file := filepath.Join(root, auth.HookFile)
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("tsload: %w", err)
	}
	bundles, err := build(root, []string{file}, opts.Logger)
	if err != nil {
		return nil, err
	}
	b := bundles[0]
	sh := &shared{name: "auth", rel: b.rel, prog: b.prog, opts: opts, log: opts.Logger, hook: true}
	first, err := newRuntime(ctx, sh)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = auth.DefaultHookTimeout
	}
	return &AuthHook{sh: sh, pool: newPool(sh, opts.PoolSize, first), timeout: timeout}, nil
}

// findAuthenticate finds auth.ts's authenticate in the evaluated module.
func (r *jsRuntime) findAuthenticate() (goja.Callable, error) {
	mod, _ := r.vm.Get("__agent").(*goja.Object)
	if mod != nil {
		if f, ok := goja.AssertFunction(mod.Get("authenticate")); ok {
			return f, nil
		}
		if d, ok := mod.Get("default").(*goja.Object); ok {
			if f, ok := goja.AssertFunction(d); ok {
				return f, nil
			}
			if f, ok := goja.AssertFunction(d.Get("authenticate")); ok {
				return f, nil
			}
		}
	}
	return nil, &LoadError{File: r.sh.rel, Message: "no authenticate function: write `export async function authenticate(request) { … }`"}
}

// Authenticate runs authenticate(request): a returned (or resolved)
// identity is checked by auth.ParseHookResult; a throw (or rejection) is
// a refusal (auth.HookRefused) whose message is shown only if
// auth.PublicMessage deems it fit; a call that does not settle in time is
// auth.HookUnavailable.
func (h *AuthHook) Authenticate(ctx context.Context, req auth.Request) (*auth.Identity, error) {
	rt, err := h.pool.get(ctx)
	if err != nil {
		return nil, &auth.HookError{Kind: auth.HookUnavailable, Err: err}
	}
	defer h.pool.put(rt)
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return nil, &auth.HookError{Kind: auth.HookUnavailable, Err: err}
	}
	var out string
	err = rt.invoke(ctx, "authenticate", h.timeout, func() (goja.Value, error) {
		arg, ok := rt.jsonValue(string(reqJSON))
		if !ok {
			return nil, errors.New("cannot build the request object")
		}
		v, err := rt.authenticate(goja.Undefined(), arg)
		if err != nil {
			return nil, rt.jsError(err)
		}
		return v, nil
	}, func(v goja.Value) error {
		if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
			out = "null"
			return nil
		}
		stringify, _ := goja.AssertFunction(rt.vm.Get("JSON").ToObject(rt.vm).Get("stringify"))
		j, err := stringify(goja.Undefined(), v)
		if err != nil {
			return rt.jsError(err)
		}
		out = j.String()
		return nil
	})
	var te *ToolError
	var to *TimeoutError
	switch {
	case errors.As(err, &te):
		pub := auth.PublicMessage(te.Name, te.Message)
		if pub == "" {
			h.sh.log.Warn("auth.ts threw", "error", te.Error(), "stack", te.Stack)
		} else {
			h.sh.log.Debug("auth.ts refused a request", "error", pub)
		}
		return nil, &auth.HookError{Kind: auth.HookRefused, Public: pub, Err: te}
	case errors.As(err, &to):
		h.sh.log.Warn("auth.ts timed out", "limit", h.timeout)
		return nil, &auth.HookError{Kind: auth.HookUnavailable, Public: fmt.Sprintf("the authentication hook did not answer within %s", h.timeout), Err: err}
	case err != nil:
		h.sh.log.Warn("auth.ts failed", "error", err)
		return nil, &auth.HookError{Kind: auth.HookUnavailable, Err: err}
	}
	id, err := auth.ParseHookResult([]byte(out))
	if err != nil {
		h.sh.log.Warn("auth.ts returned an invalid identity", "error", err)
	}
	return id, err
}

// Close releases the hook's runtimes.
func (h *AuthHook) Close() { h.pool.close() }
