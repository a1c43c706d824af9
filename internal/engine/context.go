package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/stackbone/stackbone/internal/agent"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/model"
	"github.com/stackbone/stackbone/internal/store"
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
	for _, r := range m.Reasoning {
		// Sent back with the message (Anthropic's thinking blocks).
		n += textTokens(r.Text) + textTokens(r.Data)
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
	// Each message is estimated once.
	est := make([]int, len(msgs))
	total := 0
	for i, m := range msgs {
		est[i] = estimateTokens(m)
		total += est[i]
	}
	if total <= budget {
		return msgs, true
	}
	// Units: [start, end) ranges; tool messages join the unit before them.
	type unit struct{ start, end, tokens int }
	var units []unit
	for i, m := range msgs {
		t := est[i]
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
// reserved for the answer. Under the summarize policy a durable thread's
// older turns are first summarised into a stored summary message, sent
// ahead of the recent turns (see summarize). A latest message that cannot
// fit fails the turn with a 400-class error naming the window.
func (x *execution) fitContext(ctx context.Context, req *model.Request) error {
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
	if x.spec.ContextPolicy == agent.ContextSummarize && x.durable && x.scope == "" {
		done, err := x.summarize(ctx, req, budget)
		if done || err != nil {
			return err
		}
	}
	kept, ok := trimToFit(req.Messages, budget)
	if !ok {
		return x.tooLarge(kept, fixed, reserve, window)
	}
	if len(kept) < len(req.Messages) {
		x.r.Logger.Debug("context trimmed", "agent", x.spec.Name, "thread", x.threadID,
			"sent", len(kept), "stored", len(req.Messages), "window", window)
	}
	req.Messages = kept
	return nil
}

// tooLarge is the error of a turn whose latest message (with the unit the
// model answers, kept) does not fit the window.
func (x *execution) tooLarge(kept []message.Message, fixed, reserve, window int) error {
	need := fixed + reserve + sumTokens(kept)
	return &InputError{Code: CodeContextLength, Field: FieldMessages, Index: -1,
		Reason: fmt.Sprintf("The latest message does not fit the context window of agent %q: it needs about %d tokens "+
			"(with the system prompt, the tools and %d tokens reserved for the answer), the window is %d tokens (contextWindow).",
			x.spec.Name, need, reserve, window)}
}

// SummaryInstruction is the system prompt of the model call that
// summarises a thread's older turns under the summarize context policy.
const SummaryInstruction = "Summarise this conversation so far for your own later reference: facts, decisions, open items. " +
	"Answer with the summary only."

// SummaryHeader starts the system message that carries a stored summary in
// what is sent to the model.
const SummaryHeader = "Summary of the earlier part of this conversation (written by you for your own reference):\n"

// summaryReserve is the room (tokens) kept in the budget for a new summary,
// and the summary call's maxTokens.
func summaryReserve(budget int) int {
	return max(min(budget/4, 1024), 16)
}

// summaryTokens is the estimated cost of sending a summary.
func summaryTokens(text string) int {
	return messageOverhead + textTokens(SummaryHeader) + textTokens(text)
}

// latestSummary finds the newest stored summary of this conversation and
// where, in msgs (the conversation without summaries), the turns after it
// start. from is 0 and sum nil when there is none (or the message it covers
// is no longer in msgs).
func latestSummary(all, msgs []message.Message, scope string) (sum *message.Message, from int) {
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Summarizes == "" || all[i].TaskCallID != scope {
			continue
		}
		for j, m := range msgs {
			if m.ID == all[i].Summarizes {
				return &all[i], j + 1
			}
		}
		return nil, 0
	}
	return nil, 0
}

// summaryCut chooses what to summarise: msgs[from:cut] are the turns that
// trim would leave out of msgs[from:] to fit budget (whole units, so a tool
// call and its results are on the same side), cut the index of the first
// turn to keep. ok is false when even the latest turn does not fit; cut is
// from when nothing needs to go.
func summaryCut(msgs []message.Message, from, budget int) (cut int, ok bool) {
	kept, ok := trimToFit(msgs[from:], budget)
	if !ok || len(kept) == 0 || len(kept) == len(msgs)-from {
		return from, ok
	}
	for i := from; i < len(msgs); i++ {
		if msgs[i].ID == kept[0].ID {
			return i, true
		}
	}
	return from, true
}

// summarize applies the summarize policy to req (whose messages are the
// whole conversation, summaries left out). With a stored summary whose
// following turns fit, it sends [summary, those turns]. Otherwise the turns
// trim would leave out (with the previous summary, if any) are summarised
// by one call of the agent's model, the summary is stored as a message
// covering up to the last of them, and it is sent with the recent turns.
// done is false when trim should decide instead: nothing to summarise, or
// the summary call failed (logged as a warning).
func (x *execution) summarize(ctx context.Context, req *model.Request, budget int) (done bool, err error) {
	msgs := req.Messages
	prev, from := latestSummary(x.msgs, msgs, x.scope)
	if prev == nil && sumTokens(msgs) <= budget {
		return true, nil // it all fits: nothing to summarise
	}
	prevText := ""
	if prev != nil {
		prevText = prev.Content
		if rest := msgs[from:]; sumTokens(rest)+summaryTokens(prevText) <= budget {
			req.Messages = withSummary(prevText, rest)
			return true, nil
		}
	}
	cut, ok := summaryCut(msgs, from, budget-summaryReserve(budget))
	if !ok || cut == from {
		if prev == nil {
			return false, nil
		}
		// The recent turns alone need trimming: the summary still goes first.
		kept, ok := trimToFit(msgs[from:], budget-summaryTokens(prevText))
		if !ok {
			return false, nil
		}
		req.Messages = withSummary(prevText, kept)
		return true, nil
	}
	text, err := x.summaryCall(ctx, prevText, msgs[from:cut], summaryReserve(budget))
	if err != nil {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		x.r.Logger.Warn("context summary failed; trimming instead", "agent", x.spec.Name, "thread", x.threadID, "err", err)
		return false, nil
	}
	sum := message.Message{ID: x.r.NewID("msg"), Role: message.System, Content: text, Summarizes: msgs[cut-1].ID}
	if err := x.checkpoint(ctx, store.Checkpoint{Messages: []message.Message{sum}}); err != nil {
		return true, err
	}
	x.msgs = append(x.msgs, sum)
	x.r.Logger.Debug("context summarised", "agent", x.spec.Name, "thread", x.threadID,
		"summarised", cut-from, "upTo", sum.Summarizes)
	kept, ok := trimToFit(msgs[cut:], budget-summaryTokens(text))
	if !ok {
		return false, nil
	}
	req.Messages = withSummary(text, kept)
	return true, nil
}

// sumTokens is the estimated tokens of msgs.
func sumTokens(msgs []message.Message) int {
	n := 0
	for _, m := range msgs {
		n += estimateTokens(m)
	}
	return n
}

// withSummary is what is sent: the summary as a system message, then the
// recent turns.
func withSummary(text string, recent []message.Message) []message.Message {
	out := make([]message.Message, 0, len(recent)+1)
	out = append(out, message.Message{Role: message.System, Content: SummaryHeader + text})
	return append(out, recent...)
}

// summaryCall asks the agent's model for a summary of turns (after the
// previous summary, if any), written out as a transcript in one user
// message so the call needs no tool definitions.
func (x *execution) summaryCall(ctx context.Context, prev string, turns []message.Message, maxTokens int) (string, error) {
	var b strings.Builder
	if prev != "" {
		b.WriteString("Earlier summary:\n" + prev + "\n\n")
	}
	b.WriteString("Conversation:\n")
	for _, m := range turns {
		switch {
		case m.Role == message.Tool:
			fmt.Fprintf(&b, "tool %s result: %s\n", m.ToolName, m.Content)
		default:
			if m.Content != "" {
				fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
			}
			for _, p := range m.Parts {
				fmt.Fprintf(&b, "%s: [%s]\n", m.Role, p.Type)
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "%s called %s %s\n", m.Role, c.Name, c.Arguments)
			}
		}
	}
	// The summary is never shown: a call cut part way can start again.
	req := model.Request{Model: x.modelName, System: SummaryInstruction, MaxTokens: maxTokens,
		Messages: []message.Message{{Role: message.User, Content: b.String()}},
		Timeouts: x.spec.ModelTimeouts.Or(x.r.ModelTimeouts), Restartable: true}
	var text strings.Builder
	for ch, err := range x.provider.Stream(ctx, req) {
		if err != nil {
			return "", err
		}
		switch ch.Type {
		case model.Restart:
			text.Reset()
		case model.Text:
			text.WriteString(ch.Text)
		case model.Finish:
			x.addUsage(ch.Usage)
		}
	}
	out := strings.TrimSpace(text.String())
	if out == "" {
		return "", fmt.Errorf("the model answered the summary request with no text")
	}
	return out, nil
}
