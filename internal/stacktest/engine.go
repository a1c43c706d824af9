package stacktest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/app"
	"github.com/stackbone/stackbone/internal/config"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/model/scripted"
	"github.com/stackbone/stackbone/internal/store"
)

// Engine is the agent loop without HTTP: a runner built as the server builds
// it (app.NewRunner), on a real SQLite store in a temp folder, with the
// default agents (or Options.Agents) and a scripted model answering
// in-process. Engine tests drive it with Turn and Decide and assert on the
// events and on the store. Only Script, Agents, Configure and Store of
// Options apply.
type Engine struct {
	// Env holds the store, the runner, the tool counters and the logs (URL
	// and Upstream are unset: nothing listens).
	*Env
}

// NewEngine starts a runner; it is waited for and its store closed when the
// test ends.
func NewEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	if opts.Script == "" {
		opts.Script = DefaultScript
	}
	sc, err := script.Parse([]byte(opts.Script))
	if err != nil {
		t.Fatalf("script: %v", err)
	}
	env := &Env{Calls: &Counter{m: map[string]int{}, args: map[string][]json.RawMessage{}}, Logs: &LogBuffer{}}
	cfg := config.Defaults(config.Dev)
	cfg.Dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.LogLevel = "debug"
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	if err := cfg.Finish(); err != nil {
		t.Fatalf("config: %v", err)
	}
	logger, specs := env.open(t, &cfg, opts, "scripted/test-model")
	runner, err := app.NewRunner(&cfg, env.Store, agent.NewRegistry(specs...), oneModel{scripted.New(sc)}, logger, engine.Hooks{})
	if err != nil {
		t.Fatalf("build the engine: %v", err)
	}
	env.Runner = runner
	t.Cleanup(func() {
		env.Runner.Wait()
		_ = env.Store.Close()
		if t.Failed() {
			t.Logf("engine log:\n%s", env.Logs.String())
		}
	})
	return &Engine{Env: env}
}

// oneModel resolves every agent's model to one provider.
type oneModel struct{ p model.Provider }

func (m oneModel) Resolve(ref, agentDir string) (model.Provider, string, error) {
	return m.p, "test-model", nil
}

// Turn starts one turn and returns every event its consumer receives, up to
// and including the terminal one (RunFinished or RunError). It fails the
// test when Start refuses the turn or the run ends without a terminal event.
func (e *Engine) Turn(t testing.TB, in engine.Input) []event.Event {
	t.Helper()
	if in.Tenant == "" {
		in.Tenant = "dev"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run, err := e.Runner.Start(ctx, in)
	if err != nil {
		t.Fatalf("start %s: %v", in.Agent, err)
	}
	var evs []event.Event
	for ev := range run.Events() {
		evs = append(evs, ev)
		if ev.Type == event.RunFinished || ev.Type == event.RunError {
			return evs
		}
	}
	t.Fatalf("run %s ended without a terminal event: %v", run.ID, Types(evs))
	return nil
}

// Follow collects the live events of a thread's runs from the runner's bus
// until a terminal event (RunFinished or RunError) arrives: the events of a
// run that no request consumes, such as one resumed after a decision.
// Subscribe before the run starts (before Decide), then call wait.
func (e *Engine) Follow(t testing.TB, tenant, thread string) (wait func() []event.Event) {
	t.Helper()
	sub := e.Runner.Bus.Subscribe(tenant, thread)
	return func() []event.Event {
		t.Helper()
		defer sub.Close()
		var evs []event.Event
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev := <-sub.C:
				evs = append(evs, *ev)
				if ev.Type == event.RunFinished || ev.Type == event.RunError {
					return evs
				}
			case <-timeout:
				t.Fatalf("thread %s: no terminal event; got %v", thread, Types(evs))
				return nil
			}
		}
	}
}

// Pending returns a thread's pending decisions, failing the test on error.
func (e *Engine) Pending(t testing.TB, tenant, thread string) []store.Interrupt {
	t.Helper()
	its, err := e.Store.ListInterrupts(context.Background(), tenant, store.InterruptFilter{ThreadID: thread, Status: store.Pending})
	if err != nil {
		t.Fatalf("list interrupts: %v", err)
	}
	return its
}

// Types lists the events' types, for messages and comparisons.
func Types(evs []event.Event) []event.Type {
	out := make([]event.Type, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// Last returns the last event of evs (the terminal one of Turn and Follow).
func Last(evs []event.Event) event.Event {
	if len(evs) == 0 {
		return event.Event{}
	}
	return evs[len(evs)-1]
}
