package engine

import (
	"fmt"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
)

// Token estimates. The engine never sees the provider's tokenizer, so what
// fits a context window is judged by a deterministic estimate: about four
// bytes a token, plus a fixed overhead per message and per tool call, and a
// flat cost per image.
const (
	bytesPerToken    = 4
	messageOverhead  = 4
	toolCallOverhead = 8
	imageTokens      = 1000
	// DefaultAnswerReserve is the room kept for the answer when the agent's
	// modelSettings set no maxTokens.
	DefaultAnswerReserve = 4096
)

// CodeContextLength is the public code of a turn whose latest message does
// not fit the agent's context window even with all older turns left out.
const CodeContextLength = "context_length_exceeded"

func textTokens(s string) int { return (len(s) + bytesPerToken - 1) / bytesPerToken }

// estimateTokens is the estimated token count of one message.
func estimateTokens(m message.Message) int {
	n := messageOverhead + textTokens(m.Content) + textTokens(m.ToolName)
	for _, c := range m.ToolCalls {
		n += toolCallOverhead + textTokens(c.Name) + textTokens(c.Arguments)
	}
	for _, p := range m.Parts {
		if p.Type == "image" {
			n += imageTokens
		} else {
			n += textTokens(p.Data) + textTokens(p.URL)
		}
	}
	return n
}

// fixedTokens is the estimated cost of what every request carries besides
// the messages: the system prompt and the tool definitions.
func fixedTokens(system string, tools []model.ToolDef) int {
	n := 0
	if system != "" {
		n = messageOverhead + textTokens(system)
	}
	for _, t := range tools {
		n += toolCallOverhead + textTokens(t.Name) + textTokens(t.Description) + textTokens(string(t.Parameters))
	}
	return n
}

// trimToFit returns the messages to send so that their estimated tokens
// stay within budget: it drops the oldest turns first and keeps the order.
// A unit of dropping is a message together with the tool results that
// answer it, so a tool call never goes without its results, nor a result
// without its call. The latest user message and the last unit (the one the
// model now answers) are always kept; after dropping, what is sent starts
// with a user message. ok is false when even those do not fit (kept then
// holds them alone). msgs is not changed.
func trimToFit(msgs []message.Message, budget int) (kept []message.Message, ok bool) {
	total := 0
	for _, m := range msgs {
		total += estimateTokens(m)
	}
	if total <= budget {
		return msgs, true
	}
	// Units: [start, end) ranges; tool messages join the unit before them.
	type unit struct{ start, end, tokens int }
	var units []unit
	for i, m := range msgs {
		t := estimateTokens(m)
		if m.Role == message.Tool && len(units) > 0 {
			units[len(units)-1].end = i + 1
			units[len(units)-1].tokens += t
			continue
		}
		units = append(units, unit{i, i + 1, t})
	}
	pinned := -1 // the unit of the latest user message
	for u := len(units) - 1; u >= 0; u-- {
		if msgs[units[u].start].Role == message.User {
			pinned = u
			break
		}
	}
	last := len(units) - 1
	need := units[last].tokens
	if pinned >= 0 && pinned != last {
		need += units[pinned].tokens
	}
	// Keep the newest droppable units while they fit, newest first.
	keep := make([]bool, len(units))
	keep[last] = true
	if pinned >= 0 {
		keep[pinned] = true
	}
	ok = need <= budget
	used := need
	for u := last - 1; u >= 0 && ok; u-- {
		if keep[u] {
			continue
		}
		if used+units[u].tokens > budget {
			break
		}
		keep[u] = true
		used += units[u].tokens
	}
	// What is sent starts with a user message: older units kept before the
	// first kept user message lose their question, so they go too.
	first := true
	for u := range units {
		if !keep[u] {
			continue
		}
		if first && msgs[units[u].start].Role != message.User && u != last && u != pinned {
			continue
		}
		first = false
		kept = append(kept, msgs[units[u].start:units[u].end]...)
	}
	return kept, ok
}

// fitContext applies the agent's context policy to a request about to be
// sent: with a known window, req.Messages becomes the most recent turns that
// fit the window minus the system prompt, the tool definitions and the room
// reserved for the answer. A latest message that cannot fit fails the turn
// with a 400-class error naming the window.
func (x *execution) fitContext(req *model.Request) error {
	window := x.spec.Window(x.modelName)
	if window <= 0 {
		return nil
	}
	reserve := DefaultAnswerReserve
	if req.MaxTokens > 0 {
		reserve = req.MaxTokens
	}
	fixed := fixedTokens(req.System, req.Tools)
	budget := window - reserve - fixed
	kept, ok := trimToFit(req.Messages, budget)
	if !ok {
		need := fixed + reserve
		for _, m := range kept {
			need += estimateTokens(m)
		}
		return &InputError{Code: CodeContextLength, Field: FieldMessages, Index: -1,
			Reason: fmt.Sprintf("The latest message does not fit the context window of agent %q: it needs about %d tokens "+
				"(with the system prompt, the tools and %d tokens reserved for the answer), the window is %d tokens (contextWindow).",
				x.spec.Name, need, reserve, window)}
	}
	if len(kept) < len(req.Messages) {
		x.r.Logger.Debug("context trimmed", "agent", x.spec.Name, "thread", x.threadID,
			"sent", len(kept), "stored", len(req.Messages), "window", window)
	}
	req.Messages = kept
	return nil
}
