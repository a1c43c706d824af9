// Package script is a deterministic stand-in for a language model. A script
// is an ordered list of rules read from JSON; each model request is answered
// by the first rule whose conditions match the conversation. The answer is
// decided from the request alone (no hidden state), so a run that crashes
// and resumes gets the same answer again.
//
// A script file is either a JSON array of rules or an object {"rules": [...]}:
//
//	[
//	  {"when": {"lastUser": "weather"},
//	   "reply": {"text": "Let me check.",
//	             "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
//	  {"when": {"lastTool": "get_weather"},
//	   "reply": {"text": "It is {{lastTool}}."}},
//	  {"reply": {"text": "You said: {{lastUser}}"}}
//	]
//
// Conditions (all optional, all must hold; a rule without "when" always
// matches):
//
//	lastUser   substring (case-insensitive) of the last user message (a
//	           client's own context block, such as Codex's
//	           <environment_context>, is not one)
//	lastTool   name of the tool whose result is the last message
//	afterTool  true: the last message is a tool result; false: it is not
//	system     substring (case-insensitive) of the system prompt
//
// The last user message stays the same while the model works through tool
// calls, so put rules for tool results (lastTool, afterTool) before the
// lastUser rule that started the calls, or that rule matches again and the
// model calls the tool forever.
//
// Reply fields:
//
//	text          assistant text; templates {{lastUser}}, {{lastTool}} (the
//	              content of the last tool result) and {{toolCount}} (number
//	              of tool results so far) are expanded, also inside the
//	              string values of tool call arguments
//	toolCalls     [{"name": "...", "arguments": {...}}]
//	reasoning     the model's reasoning before its answer (templates
//	              expanded): the mock OpenAI upstream streams it as
//	              reasoning_content deltas (message.reasoning_content when
//	              not streamed), the scripted provider yields it as a
//	              plain-text reasoning block; the mock Anthropic upstream
//	              keeps its own thinking (modeltest.ThinkingText)
//	delayMs       pause before answering
//	chunkDelayMs  pause between streamed chunks
//	stop          "stop" (default) or "length"; "tool_calls" is implied by toolCalls
//	error         {"status": 503, "message": "..."}: answer with that upstream error
package script

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
)

// ErrNoMatch is returned by Reply when no rule matches the request.
var ErrNoMatch = errors.New("script: no rule matches the conversation")

// ErrInvalid is wrapped by Parse and Load for a malformed script.
var ErrInvalid = errors.New("invalid model script")

// Script is a parsed, immutable list of rules. It is safe for concurrent use.
type Script struct {
	// Rules are tried in order; the first match wins.
	Rules []Rule `json:"rules"`
}

// Rule is one "when this, answer that" entry.
type Rule struct {
	// When holds the conditions; nil matches every request.
	When *When `json:"when,omitempty"`
	// Reply is the answer.
	Reply ReplySpec `json:"reply"`
}

// When are the conditions of a rule. Empty fields are not checked.
type When struct {
	// LastUser is a case-insensitive substring of the last user message.
	LastUser string `json:"lastUser,omitempty"`
	// LastTool is the name of the tool whose result is the last message.
	LastTool string `json:"lastTool,omitempty"`
	// AfterTool, when set, requires the last message to be (true) or not to
	// be (false) a tool result.
	AfterTool *bool `json:"afterTool,omitempty"`
	// System is a case-insensitive substring of the system prompt.
	System string `json:"system,omitempty"`
}

// ReplySpec is a rule's answer as written in the script.
type ReplySpec struct {
	Text string `json:"text,omitempty"`
	// Reasoning is what the model reasons before its answer.
	Reasoning    string         `json:"reasoning,omitempty"`
	ToolCalls    []ToolCallSpec `json:"toolCalls,omitempty"`
	DelayMs      int            `json:"delayMs,omitempty"`
	ChunkDelayMs int            `json:"chunkDelayMs,omitempty"`
	// Stop is "stop" or "length"; empty means "stop" (or "tool_calls" when
	// ToolCalls is set).
	Stop  string     `json:"stop,omitempty"`
	Error *ErrorSpec `json:"error,omitempty"`
}

// ToolCallSpec is a tool call as written in the script.
type ToolCallSpec struct {
	Name string `json:"name"`
	// Arguments is a JSON object (missing means {}).
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ErrorSpec makes a rule answer with an upstream error.
type ErrorSpec struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
}

// Reply is a rule's answer resolved for one request: templates expanded,
// tool call ids assigned, text split into stream chunks.
type Reply struct {
	// Rule is the index of the rule that matched.
	Rule int
	// Text is the full assistant text.
	Text string
	// Chunks is Text split into a few pieces (by words); joined they are Text.
	Chunks []string
	// Reasoning is the reasoning before the answer, ReasoningChunks it
	// split as Chunks is.
	Reasoning       string
	ReasoningChunks []string
	// ToolCalls are the calls, with deterministic ids and JSON arguments.
	ToolCalls []message.ToolCall
	// Delay is the pause before answering, ChunkDelay the pause between chunks.
	Delay      time.Duration
	ChunkDelay time.Duration
	// Stop is why the step ends.
	Stop event.StopReason
	// Usage is a deterministic token estimate.
	Usage event.Usage
	// Error, when set, is the upstream error to answer with instead.
	Error *ErrorSpec
}

// Parse reads a script from JSON (an array of rules or {"rules": [...]}).
func Parse(data []byte) (*Script, error) {
	data = bytes.TrimSpace(data)
	var s Script
	if len(data) > 0 && data[0] == '[' {
		if err := strictUnmarshal(data, &s.Rules); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	} else if err := strictUnmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(s.Rules) == 0 {
		return nil, fmt.Errorf("%w: no rules", ErrInvalid)
	}
	for i, r := range s.Rules {
		if err := r.Reply.validate(); err != nil {
			return nil, fmt.Errorf("%w: rule %d: %w", ErrInvalid, i, err)
		}
	}
	return &s, nil
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the script")
	}
	return nil
}

func (r ReplySpec) validate() error {
	switch r.Stop {
	case "", "stop", "length":
	default:
		return fmt.Errorf("stop %q: want \"stop\" or \"length\"", r.Stop)
	}
	if r.DelayMs < 0 || r.ChunkDelayMs < 0 {
		return errors.New("delays must not be negative")
	}
	if r.Error != nil {
		if r.Error.Status < 400 || r.Error.Status > 599 {
			return fmt.Errorf("error status %d: want 400-599", r.Error.Status)
		}
		return nil
	}
	for i, c := range r.ToolCalls {
		if c.Name == "" {
			return fmt.Errorf("tool call %d: name is required", i)
		}
		if len(c.Arguments) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(c.Arguments, &obj); err != nil || obj == nil {
				return fmt.Errorf("tool call %d (%s): arguments must be a JSON object", i, c.Name)
			}
		}
	}
	if r.Text == "" && len(r.ToolCalls) == 0 {
		return errors.New("reply needs text, toolCalls or error")
	}
	return nil
}

// Load reads and parses a script file.
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load model script: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// MustParse is Parse for tests and literals; it panics on error.
func MustParse(data string) *Script {
	s, err := Parse([]byte(data))
	if err != nil {
		panic(err)
	}
	return s
}

// Reply answers req with the first matching rule. It returns an error
// wrapping ErrNoMatch when no rule matches.
func (s *Script) Reply(req model.Request) (Reply, error) {
	c := inspect(req)
	for i, r := range s.Rules {
		if !r.When.matches(c) {
			continue
		}
		return r.Reply.resolve(i, c, req)
	}
	return Reply{}, fmt.Errorf("%w (last user message %q)", ErrNoMatch, truncate(c.lastUser, 80))
}

// conv is what the rules look at.
type conv struct {
	system    string
	lastUser  string
	afterTool bool
	lastTool  string // name of the tool answered by the last message
	lastRes   string // content of the last tool result anywhere
	toolCount int
	length    int
}

func inspect(req model.Request) conv {
	c := conv{system: req.System, length: len(req.Messages)}
	names := map[string]string{}
	for _, m := range req.Messages {
		switch m.Role {
		case message.System:
			c.system += "\n" + m.Content
		case message.User:
			if !clientContext(m.Content) {
				c.lastUser = m.Content
			}
		case message.Assistant:
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
			}
		case message.Tool:
			c.toolCount++
			c.lastRes = m.Content
		}
	}
	if n := len(req.Messages); n > 0 {
		if last := req.Messages[n-1]; last.Role == message.Tool {
			c.afterTool = true
			c.lastTool = last.ToolName
			if c.lastTool == "" {
				c.lastTool = names[last.ToolCallID]
			}
		}
	}
	return c
}

// clientContext reports whether a user message is context a client adds
// on its own, not what its user typed: Codex's <environment_context> block
// (the working directory, the shell, the current date), which Codex sends
// again as the last user message when it changed (at midnight, say).
func clientContext(content string) bool {
	return strings.HasPrefix(strings.TrimSpace(content), "<environment_context>")
}

// Matches reports whether req meets the conditions, as a rule's When is
// checked (a nil When matches every request).
func (w *When) Matches(req model.Request) bool { return w.matches(inspect(req)) }

func (w *When) matches(c conv) bool {
	if w == nil {
		return true
	}
	if w.LastUser != "" && !containsFold(c.lastUser, w.LastUser) {
		return false
	}
	if w.LastTool != "" && (!c.afterTool || c.lastTool != w.LastTool) {
		return false
	}
	if w.AfterTool != nil && *w.AfterTool != c.afterTool {
		return false
	}
	if w.System != "" && !containsFold(c.system, w.System) {
		return false
	}
	return true
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func (r ReplySpec) resolve(idx int, c conv, req model.Request) (Reply, error) {
	out := Reply{
		Rule:       idx,
		Delay:      time.Duration(r.DelayMs) * time.Millisecond,
		ChunkDelay: time.Duration(r.ChunkDelayMs) * time.Millisecond,
		Stop:       event.StopEnd,
	}
	if r.Error != nil {
		e := *r.Error
		e.Message = expand(e.Message, c)
		out.Error = &e
		return out, nil
	}
	out.Text = expand(r.Text, c)
	out.Chunks = SplitText(out.Text)
	out.Reasoning = expand(r.Reasoning, c)
	out.ReasoningChunks = SplitText(out.Reasoning)
	for i, tc := range r.ToolCalls {
		args, err := expandArgs(tc.Arguments, c)
		if err != nil {
			return Reply{}, fmt.Errorf("rule %d tool call %d: %w", idx, i, err)
		}
		out.ToolCalls = append(out.ToolCalls, message.ToolCall{ID: CallID(c.length, i), Name: tc.Name, Arguments: args})
	}
	switch {
	case r.Stop == "length":
		out.Stop = event.StopLength
	case len(out.ToolCalls) > 0:
		out.Stop = event.StopToolCalls
	}
	out.Usage = estimateUsage(req, out)
	return out, nil
}

// CallID is the deterministic id of tool call index in the answer to a
// conversation of convLen messages: "call_" + 12 hex digits. Each step
// answers a longer conversation, so ids are unique within a conversation.
func CallID(convLen, index int) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(convLen) + ":" + strconv.Itoa(index)))
	return "call_" + hex.EncodeToString(sum[:6])
}

func expand(s string, c conv) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	return strings.NewReplacer(
		"{{lastUser}}", c.lastUser,
		"{{lastTool}}", c.lastRes,
		"{{toolCount}}", strconv.Itoa(c.toolCount),
	).Replace(s)
}

// expandArgs returns the arguments as compact JSON text with templates
// expanded inside string values.
func expandArgs(raw json.RawMessage, c conv) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}", nil
	}
	if !bytes.Contains(raw, []byte("{{")) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	v = walk(v, c)
	out, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

func walk(v any, c conv) any {
	switch t := v.(type) {
	case string:
		return expand(t, c)
	case []any:
		for i := range t {
			t[i] = walk(t[i], c)
		}
	case map[string]any:
		for k := range t {
			t[k] = walk(t[k], c)
		}
	}
	return v
}

// SplitText splits s into chunks of a few words each (whitespace stays with
// the word before it), so a stream carries several deltas. Joined, the
// chunks equal s.
func SplitText(s string) []string {
	if s == "" {
		return nil
	}
	const wordsPerChunk = 3
	var chunks []string
	start, words := 0, 0
	inSpace := false
	for i, r := range s {
		space := r == ' ' || r == '\n' || r == '\t'
		if inSpace && !space {
			words++
			if words == wordsPerChunk {
				chunks = append(chunks, s[start:i])
				start, words = i, 0
			}
		}
		inSpace = space
	}
	return append(chunks, s[start:])
}

// SplitArgs splits JSON argument text into up to three fragments on rune
// boundaries, the way upstreams stream tool arguments. Joined, the
// fragments equal s.
func SplitArgs(s string) []string {
	if len(s) < 6 {
		return []string{s}
	}
	cut := func(n int) int {
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		return n
	}
	a, b := cut(len(s)/3), cut(2*len(s)/3)
	return []string{s[:a], s[a:b], s[b:]}
}

func estimateUsage(req model.Request, r Reply) event.Usage {
	in := len(req.System)
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, tc := range m.ToolCalls {
			in += len(tc.Name) + len(tc.Arguments)
		}
	}
	out := len(r.Text) + len(r.Reasoning)
	for _, tc := range r.ToolCalls {
		out += len(tc.Name) + len(tc.Arguments)
	}
	return event.Usage{InputTokens: in/4 + 1, OutputTokens: out/4 + 1}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
