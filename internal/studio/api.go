package studio

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"sort"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/decision"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/server"
	"github.com/stackbone/stackbone/internal/tool"
	"github.com/stackbone/stackbone/internal/wire/sse"
)

// AgentInfo is one agent as Studio shows it (GET /studio/api/agents).
type AgentInfo struct {
	Name  string `json:"name"`
	Model string `json:"model"`
	// Models are the agent's models: Model, then the fallbacks of its list.
	Models []string `json:"models"`
	// PickModels are the models a playground run may pick
	// (forwardedProps.model): Models when the server lets runs pick
	// (`stackbone dev`), else none.
	PickModels   []string       `json:"pickModels"`
	Instructions string         `json:"instructions"`
	Tools        []ToolInfo     `json:"tools"`
	Subagents    []SubagentInfo `json:"subagents"`
	// EditableState maps each client-writable state key to its JSON Schema.
	EditableState map[string]json.RawMessage `json:"editableState"`
	MaxSteps      int                        `json:"maxSteps"`
	// Source is the agent's file relative to the project folder
	// (agents/refunds.ts), never an absolute path of the host.
	Source string `json:"source,omitempty"`
	// MCPServers is the state of each of the agent's MCP servers.
	MCPServers []agent.MCPServerStatus `json:"mcpServers"`
	// A2AAgents are the agent's remote A2A agents (header values withheld).
	A2AAgents []agent.A2AAgentInfo `json:"a2aAgents"`
}

// ToolInfo is one tool of an agent.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	// Builtin marks write_todos, the file tools and task.
	Builtin bool `json:"builtin,omitempty"`
	// Approval is set when calls of the tool wait for a human.
	Approval *ApprovalInfo `json:"approval,omitempty"`
}

// ApprovalInfo describes a tool's approval rule.
type ApprovalInfo struct {
	// AllowedDecisions are the decisions a reviewer may make.
	AllowedDecisions []string `json:"allowedDecisions"`
	// Conditional is true when a predicate decides per call.
	Conditional bool `json:"conditional"`
	// Described is true when the pause carries a description.
	Described bool `json:"described"`
}

// SubagentInfo is one subagent.
type SubagentInfo struct {
	Name         string   `json:"name"`
	Description  string   `json:"description,omitempty"`
	Instructions string   `json:"instructions,omitempty"`
	Model        string   `json:"model"`
	Tools        []string `json:"tools"`
}

func toolInfo(t *tool.Tool, builtin bool) ToolInfo {
	ti := ToolInfo{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Builtin: builtin}
	if t.Approval != nil {
		ti.Approval = &ApprovalInfo{AllowedDecisions: decision.ApprovalChoices(t.Approval),
			Conditional: t.Approval.When != nil, Described: t.Approval.Description != nil}
	}
	return ti
}

// Agents describes the loaded agents for Studio, sorted by name.
func (st *Studio) Agents() []AgentInfo {
	out := []AgentInfo{}
	var builtins func(*agent.Spec) []*tool.Tool
	if st.srv.Runner != nil {
		builtins = st.srv.Runner.Builtins
	}
	for _, a := range st.srv.Agents.List() {
		ai := AgentInfo{Name: a.Name, Model: a.Model, Models: a.Models(), PickModels: []string{}, Instructions: a.Instructions,
			Tools: []ToolInfo{}, Subagents: []SubagentInfo{}, EditableState: a.EditableState, MaxSteps: a.Steps(),
			Source: projectPath(st.srv.Config.Dir, a.Source)}
		if st.srv.Runner != nil && st.srv.Runner.PickModel {
			ai.PickModels = ai.Models
		}
		if ai.EditableState == nil {
			ai.EditableState = map[string]json.RawMessage{}
		}
		ai.MCPServers = []agent.MCPServerStatus{}
		ai.A2AAgents = a.A2AAgentInfos()
		if a.Dynamic != nil {
			ai.MCPServers = a.Dynamic.Servers()
		}
		own := map[string]bool{}
		for _, t := range a.AllTools() {
			own[t.Name] = true
			ai.Tools = append(ai.Tools, toolInfo(t, false))
		}
		if builtins != nil {
			for _, t := range builtins(a) {
				if !own[t.Name] {
					ai.Tools = append(ai.Tools, toolInfo(t, true))
				}
			}
		}
		for _, s := range a.Subagents {
			si := SubagentInfo{Name: s.Name, Description: s.Description, Instructions: s.Instructions, Model: s.Model, Tools: s.Tools}
			if si.Model == "" {
				si.Model = a.Model
			}
			if si.Tools == nil {
				si.Tools = []string{}
				for _, t := range ai.Tools {
					if t.Name != "task" {
						si.Tools = append(si.Tools, t.Name)
					}
				}
			}
			sort.Strings(si.Tools)
			ai.Subagents = append(ai.Subagents, si)
		}
		out = append(out, ai)
	}
	return out
}

// projectPath names file relative to the project folder dir with forward
// slashes; a file outside it is named by its base name only, so no host path
// reaches the page.
func projectPath(dir, file string) string {
	if file == "" {
		return ""
	}
	if rel, err := filepath.Rel(dir, file); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return filepath.Base(file)
}

func (st *Studio) agents(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": st.Agents()})
}

// Change is one message of the live feed: something changed that the page
// should refetch. Kind is "run" (a run event of a thread) or "decision" (a
// decision recorded on one of the tenant's threads, on any replica).
type Change struct {
	Kind     string `json:"kind"`
	Type     string `json:"type,omitempty"`
	ThreadID string `json:"threadId,omitempty"`
}

// tokenTypes are live-only streaming events: too many and too small to be
// worth a refetch. Every other run event (including kinds added later, such
// as a decision event) is forwarded.
var tokenTypes = map[event.Type]bool{
	event.TextStart: true, event.TextDelta: true, event.TextEnd: true,
	event.ToolCallStart: true, event.ToolCallArgs: true,
	event.MessagesSnapshot: true,
}

// live is the tenant-wide change feed (SSE): "hello" on connect, then
// "change" events for run events and decisions of any of the tenant's
// threads. Everything comes from the bus subscription of the caller's
// tenant, so no other tenant's activity reaches it.
func (st *Studio) live(w http.ResponseWriter, r *http.Request) error {
	p := server.PrincipalFrom(r.Context())
	tenant := p.Tenant
	// An end user who does not see every thread hears of the threads they
	// see, and of the decisions of no thread that are theirs (and, an
	// approver, of every decision): a thread's owner never changes, so each
	// thread is looked up once.
	owners := map[string]bool{}
	sees := func(ctx context.Context, e *event.Event) bool {
		if p.AnyOwner() || (e.Type == event.DecisionMade && p.SeesAllDecisions()) {
			return true
		}
		if e.ThreadID == "" {
			return p.Sees(e.Owner)
		}
		if v, ok := owners[e.ThreadID]; ok {
			return v
		}
		th, err := st.srv.Store.GetThread(ctx, tenant, e.ThreadID)
		if err != nil {
			return false // not cached: a store hiccup hides one notice, not the thread for good
		}
		owners[e.ThreadID] = p.Sees(th.Owner)
		return owners[e.ThreadID]
	}
	sub := st.srv.Runner.Bus.SubscribeTenant(tenant)
	sw := sse.New(w)
	send := func(name string, v any) bool {
		b, err := json.Marshal(v)
		return err == nil && sw.Event(name, b) == nil
	}
	if !send("hello", map[string]string{"tenant": tenant}) {
		sub.Close()
		return nil
	}
	st.srv.Stream(r, sw, server.Feed{
		Sub: sub,
		// Fell behind: what is buffered is stale. "hello" again makes the
		// page read everything afresh.
		Resync: func(context.Context) bool { return send("hello", map[string]string{"tenant": tenant}) },
		Deliver: func(ctx context.Context, e *event.Event) bool {
			if tokenTypes[e.Type] || !sees(ctx, e) {
				return true
			}
			c := Change{Kind: "run", Type: string(e.Type), ThreadID: e.ThreadID}
			if e.Type == event.DecisionMade {
				c = Change{Kind: "decision", ThreadID: e.ThreadID}
			}
			return send("change", c)
		},
	})
	return nil
}
