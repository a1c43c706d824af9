// Package agent holds agent.Spec, the declarative description of an agent that
// every authoring path (TypeScript files through agent/tsload, Go code) ends
// in, and the Registry the server looks agents up in.
package agent

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/redact"
	"github.com/stackbone/stackbone/internal/tool"
)

// DefaultMaxSteps bounds the model calls of one turn.
const DefaultMaxSteps = 25

// Spec describes one agent.
type Spec struct {
	Name string
	// Model is "provider/model", e.g. "openai/gpt-4o-mini" or "scripted/demo".
	Model        string
	Instructions string
	Tools        []*tool.Tool
	Subagents    []Subagent
	// EditableState maps each client-writable state key to its JSON Schema.
	EditableState map[string]json.RawMessage
	// MaxSteps bounds model calls per turn; zero means DefaultMaxSteps.
	MaxSteps int
	// ContextWindow is the model's context window in tokens; zero means
	// the known window of the model (KnownContextWindow), or no limit.
	ContextWindow int
	// Multitask is what a new message does when it meets a turn still
	// running on its thread (MultitaskReject, the default, when empty;
	// MultitaskEnqueue, MultitaskInterrupt, MultitaskRollback); a request
	// may choose its own.
	Multitask string
	// ContextPolicy says what happens when a thread outgrows the window:
	// ContextTrim (the default) sends only the most recent turns that fit;
	// ContextSummarize also summarises what trim would leave out into a
	// stored summary message. The stored history is kept whole.
	ContextPolicy string
	// ApprovalMode says what a durable turn's request does when the turn
	// pauses on a decision: ApprovalPause (the default, "") ends it with
	// the pending call, ApprovalWait holds it open until the decision is
	// made (bounded by STACKBONE_APPROVAL_WAIT) and goes on with the
	// resumed turn. The request header x-stackbone-approval overrides it.
	ApprovalMode string
	// ModelTimeouts bound each model call attempt (the agent file's
	// modelSettings.timeout and .idleTimeout); a zero field means the
	// server's default (STACKBONE_MODEL_TIMEOUT, STACKBONE_MODEL_IDLE_TIMEOUT).
	ModelTimeouts model.Timeouts
	// ModelSettings are the sampling settings sent on every model call (the
	// agent file's modelSettings other than the timeouts).
	ModelSettings model.Settings
	// ClientOverrides names the settings (OverrideTemperature,
	// OverrideMaxTokens, OverrideStop, OverrideReasoningEffort) a client's request may set instead
	// of ModelSettings; a client value for any other setting is ignored.
	ClientOverrides []string
	// InstructionsFn, when set, is called before every model call of the
	// agent (not its subagents) and its text starts the system prompt,
	// followed by Instructions and the client's system text. An error fails
	// the run.
	InstructionsFn func(ctx context.Context, in InstructionsInput) (string, error)
	// Output, when set, is the JSON Schema of the agent's final answer
	// (defineDeepAgent({ output })): every turn asks the model for it
	// (OutputFormat) and validates the answer against it.
	Output json.RawMessage
	// NoTodos and NoFiles turn off the built-in write_todos and file tools.
	NoTodos bool
	NoFiles bool
	// Description says what the agent does, for callers that list agents
	// (the MCP tools at /mcp); empty means the first line of Instructions.
	Description string
	// Dir is the folder the agent was loaded from (scripted models read their
	// script from there); Source is the file.
	Dir    string
	Source string
	// Parent names the agent a subagent spec was derived from (empty for
	// agents); subagents get no `task` tool.
	Parent string
	// MCPServers are the MCP servers whose tools join the agent's own
	// (defineDeepAgent({ mcpServers })); tool/mcp connects them and sets
	// Dynamic.
	MCPServers []MCPServer
	// A2AAgents are the remote A2A agents the agent can hand work to
	// through `task`, like its subagents (defineDeepAgent({ a2aAgents })).
	A2AAgents []A2AAgent
	// Secrets are the configured values that must never leave the process
	// in clear: the agent's env values and every MCP header and env value.
	// The loader fills it; tool/mcp redacts its tools' results, errors and
	// log lines (a stdio server's stderr too) with it, and app adds it to
	// the process log's redactor.
	Secrets []string
	// Dynamic, when set, supplies tools that come and go while the agent
	// is loaded (its MCP servers' tools).
	Dynamic ToolSource
	// Close releases resources the loader holds for the agent (JS runtimes,
	// MCP connections and child processes).
	Close func()
	// MaxToolResultBytes caps every tool result the model gets (the agent
	// file's maxToolResultBytes); zero means DefaultMaxToolResultBytes. A
	// tool's own cap (tool.Tool.MaxResultBytes) wins.
	MaxToolResultBytes int
	// Fallbacks are the models tried in order after Model when it fails
	// with a 429, 5xx or overload before any output (the agent file's
	// model: ['first', ...fallbacks]).
	Fallbacks []string
	// Schedules are the agent file's schedules: turns the server runs on
	// its own time (package schedule).
	Schedules []Schedule
	// Memory, when set, gives the agent the built-in memory tools
	// (remember, recall, forget) on the tenant's memory store (the agent
	// file's memory).
	Memory *Memory
}

// Memory is an agent's built-in memory (defineDeepAgent({ memory })): its
// facts are items of Namespace, where the label {userId} stands for the
// turn's end user (nil: memory.DefaultNamespace, ["users", "{userId}"]).
type Memory struct {
	Namespace []string `json:"namespace,omitempty"`
}

// Schedule is one of an agent's schedules (defineDeepAgent({ schedules })):
// a turn with Input as its user message, run at each firing of Cron (five
// fields or a descriptor such as @every 15m) read in Timezone (an IANA
// zone; "" UTC), on thread Thread ("new", the default: a new thread per
// run). CatchUp is "one" (the default: a firing missed while the server
// was down runs once on start) or "none"; Key is the key label the runs
// count under ("": the tenant's admin).
type Schedule struct {
	Name     string `json:"name"`
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
	Input    string `json:"input"`
	Thread   string `json:"thread,omitempty"`
	CatchUp  string `json:"catchUp,omitempty"`
	Key      string `json:"key,omitempty"`
}

// DefaultMaxToolResultBytes is the cap on a tool result when neither the
// agent nor the tool sets one (about 25,000 tokens).
const DefaultMaxToolResultBytes = 100_000

// ToolResultCap returns the number of bytes of t's result the model gets on
// model: t's own cap, else the agent's, else DefaultMaxToolResultBytes, and
// never more than a quarter of the model's context window (at about 4 bytes
// a token) when the window is known.
func (s *Spec) ToolResultCap(t *tool.Tool, model string) int {
	n := DefaultMaxToolResultBytes
	switch {
	case t != nil && t.MaxResultBytes > 0:
		n = t.MaxResultBytes
	case s.MaxToolResultBytes > 0:
		n = s.MaxToolResultBytes
	}
	if w := s.Window(model); w > 0 && w < n {
		n = w
	}
	return n
}

// Settings a client may override (Spec.ClientOverrides), named as in an
// agent file's modelSettings.
const (
	OverrideTemperature = "temperature"
	OverrideMaxTokens   = "maxTokens"
	OverrideStop        = "stop"
	// OverrideReasoningEffort lets a client's thinking settings (the
	// Anthropic wire's thinking and output_config.effort) set
	// modelSettings.reasoningEffort.
	OverrideReasoningEffort = "reasoningEffort"
)

// AllowsClient reports whether a client's value for setting is used.
func (s *Spec) AllowsClient(setting string) bool {
	for _, o := range s.ClientOverrides {
		if o == setting {
			return true
		}
	}
	return false
}

// InstructionsInput is what a dynamic instructions function sees.
type InstructionsInput struct {
	// State is the thread's shared state (a JSON object).
	State    json.RawMessage
	ThreadID string
	Agent    string
}

// ToolSource supplies tools that change at run time. Tools is called on
// every turn, so it must be cheap; version changes whenever the list does.
type ToolSource interface {
	Tools() (tools []*tool.Tool, version uint64)
	// Servers reports each MCP server's connection state.
	Servers() []MCPServerStatus
}

// MCPServer is one entry of an agent file's mcpServers: a streamable HTTP
// endpoint (URL, Headers) or a stdio command (Command, Args, Env). Header and
// env values are already expanded (they may hold secrets: never log them).
type MCPServer struct {
	// Name is the key in mcpServers ([A-Za-z0-9_-]); tools are named
	// "{Name}_{tool}".
	Name    string
	URL     string
	Headers map[string]string
	Command string
	Args    []string
	Env     map[string]string
	// Approval decides which of the server's tools need a human decision.
	Approval MCPApproval
	// MaxResultBytes caps the server's tool results (maxResultBytes); zero
	// means the agent's cap.
	MaxResultBytes int
	// Tools picks and names the server's tools (mcpServers.*.tools).
	Tools MCPToolFilter
}

// MCPToolFilter picks which of an MCP server's tools an agent gets and what
// they are called: Include, when set, lists the only tools taken; Exclude
// leaves tools out; Rename maps a server's tool name to the agent-side name
// to use instead of "{server}_{tool}" (to settle a collision). All use the
// server's own tool names.
type MCPToolFilter struct {
	Include []string
	Exclude []string
	Rename  map[string]string
}

// Takes reports whether the filter lets the server's tool name through.
func (f MCPToolFilter) Takes(name string) bool {
	if f.Include != nil && !slices.Contains(f.Include, name) {
		return false
	}
	return !slices.Contains(f.Exclude, name)
}

// Transport returns "http" or "stdio".
func (m MCPServer) Transport() string {
	if m.URL != "" {
		return "http"
	}
	return "stdio"
}

// MCP approval modes (mcpServers.*.approval).
const (
	// MCPApprovalAnnotations asks for approval unless a tool says
	// readOnlyHint: true or destructiveHint: false (the default).
	MCPApprovalAnnotations = "annotations"
	// MCPApprovalAlways asks for approval on every call.
	MCPApprovalAlways = "always"
	// MCPApprovalNever never asks.
	MCPApprovalNever = "never"
)

// MCPApproval is a server's approval policy.
type MCPApproval struct {
	// Mode is one of the MCPApproval* modes; empty means annotations.
	Mode string
	// Tools, when set (the object form), maps server tool names to their
	// rule: a nil *tool.Approval means no approval. Tools not listed follow
	// the annotations.
	Tools map[string]*tool.Approval
}

// MCPServerStatus is what GET /v1/agents/{name} and Studio show of a server.
type MCPServerStatus struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
	// Status is "connected", "connecting" or "down".
	Status string `json:"status"`
	// Error is the last connection error while not connected.
	Error string `json:"error,omitempty"`
	// Tools are the agent-side names of the server's tools in the toolset.
	Tools []string `json:"tools"`
}

// A2AAgent is one entry of an agent file's a2aAgents: a remote agent spoken
// to over A2A 1.0 (JSON-RPC), known by its Agent Card at URL (a card URL, or
// a base under which /.well-known/agent-card.json is read). Header values
// are already expanded (they may hold secrets: never log them).
type A2AAgent struct {
	// Name is the key in a2aAgents: the subagent_type the model names.
	Name    string
	URL     string
	Headers map[string]string
	// Description, when set, is what the model is told of the agent
	// instead of the summary of its card's skills.
	Description string
}

// A2AAgent returns the agent's remote A2A agent named name, or nil.
func (s *Spec) A2AAgent(name string) *A2AAgent {
	for i := range s.A2AAgents {
		if s.A2AAgents[i].Name == name {
			return &s.A2AAgents[i]
		}
	}
	return nil
}

// A2AAgentInfo is what GET /v1/agents/{name} and Studio show of a remote
// A2A agent: never its header values, and its URL with any credentials
// redacted.
type A2AAgentInfo struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Description string `json:"description,omitempty"`
	// Headers are the names of the headers sent to it (values withheld).
	Headers []string `json:"headers"`
}

// A2AAgentInfos returns the agent's remote A2A agents as shown to clients.
func (s *Spec) A2AAgentInfos() []A2AAgentInfo {
	out := []A2AAgentInfo{}
	red := redact.New(s.Secrets...)
	for _, a := range s.A2AAgents {
		names := make([]string, 0, len(a.Headers))
		for k := range a.Headers {
			names = append(names, k)
		}
		sort.Strings(names)
		out = append(out, A2AAgentInfo{Name: a.Name, URL: red.String(a.URL), Description: red.String(a.Description), Headers: names})
	}
	return out
}

// Subagent is a helper agent the parent can hand work to through `task`.
type Subagent struct {
	Name         string
	Description  string
	Instructions string
	// Model defaults to the parent's.
	Model string
	// Tools names the parent tools the subagent may use; nil means all of the
	// parent's tools except `task`.
	Tools []string
	// ModelSettings, when set, override the parent's field by field.
	ModelSettings *model.Settings `json:",omitempty"`
}

// Models are the agent's models: Model, then its Fallbacks.
func (s *Spec) Models() []string {
	return append([]string{s.Model}, s.Fallbacks...)
}

// ModelDir is the folder model files are read from: the agent file's own
// folder, or Dir for agents built in Go.
func (s *Spec) ModelDir() string {
	if s.Source != "" {
		return filepath.Dir(s.Source)
	}
	return s.Dir
}

// ContextTrim is the context policy that drops the oldest turns from what
// is sent to the model.
const ContextTrim = "trim"

// ApprovalPause is the approval mode that ends a turn's request when the
// turn pauses on a decision (the default).
const ApprovalPause = "pause"

// ApprovalWait is the approval mode that holds a turn's request open while
// the turn waits on a decision, then goes on with the resumed turn.
const ApprovalWait = "wait"

// ContextSummarize is the context policy that summarises, with the agent's
// own model, the older turns of a durable thread that no longer fit, and
// sends the stored summary with the recent turns.
const ContextSummarize = "summarize"

// knownWindows are the context windows (tokens) of common models, by model
// name prefix; the first match wins.
var knownWindows = []struct {
	prefix string
	tokens int
}{
	{"gpt-4o", 128_000},
	{"gpt-4.1", 1_047_576},
	{"claude-sonnet-4", 200_000},
	{"claude-opus-4", 200_000},
	{"claude-3-7", 200_000},
	{"claude-3-5", 200_000},
}

// KnownContextWindow returns the context window of a common model, given as
// "provider/model" or the bare model name; zero when it is not known.
func KnownContextWindow(model string) int {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	for _, w := range knownWindows {
		if strings.HasPrefix(model, w.prefix) {
			return w.tokens
		}
	}
	return 0
}

// Window returns the context window the agent's calls of model must fit:
// ContextWindow when set, else the model's known window; zero means no
// limit.
func (s *Spec) Window(model string) int {
	if s.ContextWindow > 0 {
		return s.ContextWindow
	}
	return KnownContextWindow(model)
}

// Steps returns the effective step limit.
func (s *Spec) Steps() int {
	if s.MaxSteps > 0 {
		return s.MaxSteps
	}
	return DefaultMaxSteps
}

// AllTools returns the agent's own tools followed by its dynamic ones (MCP
// servers' tools that are currently available). Built-ins are not included.
func (s *Spec) AllTools() []*tool.Tool {
	if s.Dynamic == nil {
		return s.Tools
	}
	dyn, _ := s.Dynamic.Tools()
	if len(dyn) == 0 {
		return s.Tools
	}
	return append(append(make([]*tool.Tool, 0, len(s.Tools)+len(dyn)), s.Tools...), dyn...)
}

// Tool returns the agent's tool (own or dynamic) named name, or nil.
func (s *Spec) Tool(name string) *tool.Tool {
	for _, t := range s.AllTools() {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Registry is the set of loaded agents. It is safe for concurrent use and can
// be swapped whole when agent files are reloaded.
type Registry struct {
	agents atomic.Pointer[map[string]*Spec]

	mu        sync.Mutex
	onReplace []func()
}

// OnReplace registers f to be called after every Replace (a reload), so
// what lists the agents (the /mcp tools) can follow at once.
func (r *Registry) OnReplace(f func()) {
	r.mu.Lock()
	r.onReplace = append(r.onReplace, f)
	r.mu.Unlock()
}

// NewRegistry returns a registry holding specs.
func NewRegistry(specs ...*Spec) *Registry {
	r := &Registry{}
	r.Replace(specs)
	return r
}

// Replace swaps in a new set of agents and returns the old ones.
func (r *Registry) Replace(specs []*Spec) []*Spec {
	m := make(map[string]*Spec, len(specs))
	for _, s := range specs {
		m[s.Name] = s
	}
	old := r.agents.Swap(&m)
	r.mu.Lock()
	hooks := slices.Clone(r.onReplace)
	r.mu.Unlock()
	for _, f := range hooks {
		f()
	}
	if old == nil {
		return nil
	}
	out := make([]*Spec, 0, len(*old))
	for _, s := range *old {
		out = append(out, s)
	}
	return out
}

// Get returns the agent named name, or nil.
func (r *Registry) Get(name string) *Spec {
	m := r.agents.Load()
	if m == nil {
		return nil
	}
	return (*m)[name]
}

// List returns the agents sorted by name.
func (r *Registry) List() []*Spec {
	m := r.agents.Load()
	if m == nil {
		return nil
	}
	out := make([]*Spec, 0, len(*m))
	for _, s := range *m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// OutputFormat is the response format an agent with Output asks the model
// for: json_schema named after the agent (characters a provider refuses in a
// format name become "_"), not strict, since the engine validates the answer
// itself and a strict schema must meet provider rules an agent's schema need
// not. Nil when the agent declares no Output.
func (s *Spec) OutputFormat() *model.ResponseFormat {
	if len(s.Output) == 0 {
		return nil
	}
	name := []byte(s.Name)
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			name[i] = '_'
		}
	}
	if len(name) == 0 {
		name = []byte("output")
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return &model.ResponseFormat{Type: model.FormatJSONSchema, Name: string(name), Schema: s.Output}
}

// Double-texting strategies (Spec.Multitask, and a request's own choice).
const (
	MultitaskReject    = "reject"
	MultitaskEnqueue   = "enqueue"
	MultitaskInterrupt = "interrupt"
	MultitaskRollback  = "rollback"
)
