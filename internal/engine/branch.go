package engine

import (
	"reflect"

	"github.com/stackbone/stackbone/internal/message"
	"github.com/stackbone/stackbone/internal/store"
)

// A client that sends its whole conversation on every request (Input.History:
// Chat Completions and Anthropic Messages on a session, AG-UI) edits or
// regenerates by sending a conversation that leaves the stored one at some
// message: an earlier user message changed, the last answer left out. Such
// a turn goes on from the last message both hold, on a new branch of the
// thread (store.BeginRun.From), instead of merging the two conversations.
//
// Where the request leaves the stored conversation (its own messages: not a
// subagent's, not a summary) is found in one of two ways:
//
//   - By id, when the client names its messages (AG-UI): the first stored
//     message whose id the request leaves out, or a user message whose
//     content it changed. The request must hold the stored conversation's
//     first message (else it sends only new messages) and none of the
//     stored messages after that point (else it merely skipped some).
//   - By content, otherwise: the user messages of both, compared in order
//     (text and parts). A request holding an answer (an assistant message)
//     is a history: when one of the stored user messages is not the
//     request's at the same place, the turn goes on from the message before
//     it, with the request's messages from that user message on. A request
//     whose user messages are the stored ones up to some point, ending with
//     the last of them (its answer left out), regenerates that answer. A
//     request without an answer is new messages only (the head goes on, as
//     always), even one repeating the first question.

// divergence is where a request that sends its whole conversation leaves
// the stored one.
type divergence struct {
	// from is the message the turn goes on from (BeginRun.From; 0: the
	// conversation's end, no branch; store.FromStart: before its first).
	from int64
	// sent are the request's messages to take as its input.
	sent []message.Message
	// regen says the request brings no new message: it asks again for the
	// answer to the stored message it ends with.
	regen bool
}

// own is the agent's own conversation in msgs, as its clients see it: no
// subagent's messages, no summaries, no system messages (pointers into
// msgs, so the check copies no message).
func own(msgs []message.Message) []*message.Message {
	out := make([]*message.Message, 0, len(msgs))
	for i := range msgs {
		if m := &msgs[i]; m.TaskCallID == "" && m.Summarizes == "" && m.Role != message.System {
			out = append(out, m)
		}
	}
	return out
}

// sameUser reports whether two user messages say the same.
func sameUser(a, b *message.Message) bool {
	return a.Content == b.Content && len(a.Parts) == len(b.Parts) && (len(a.Parts) == 0 || reflect.DeepEqual(a.Parts, b.Parts))
}

// diverge finds where the request's messages (sent, the whole conversation
// as the client holds it) leave the stored conversation (head).
func diverge(head, sent []message.Message) divergence {
	none := divergence{sent: sent}
	stored, req := own(head), own(sent)
	if len(stored) == 0 || len(req) == 0 {
		return none
	}
	for _, m := range req {
		if m.ID != "" {
			return divergeByID(stored, req, sent)
		}
	}
	return divergeByContent(stored, req, sent)
}

// divergeByID is diverge for a client that names its messages.
func divergeByID(stored, req []*message.Message, sent []message.Message) divergence {
	none := divergence{sent: sent}
	byID := make(map[string]*message.Message, len(req))
	for _, m := range req {
		if m.ID != "" {
			byID[m.ID] = m
		}
	}
	p := 0
	for ; p < len(stored); p++ {
		m, ok := byID[stored[p].ID]
		if !ok || (stored[p].Role == message.User && !sameUser(stored[p], m)) {
			break
		}
	}
	if _, first := byID[stored[0].ID]; !first || p == len(stored) {
		return none // only new messages, or the whole conversation and more
	}
	for _, m := range stored[p+1:] {
		if _, ok := byID[m.ID]; ok {
			return none // it skipped some messages, and kept later ones
		}
	}
	d := divergence{from: store.FromStart, sent: sent, regen: true}
	if p > 0 {
		d.from = stored[p-1].Seq
	}
	known := make(map[string]bool, p)
	for _, m := range stored[:p] {
		known[m.ID] = true
	}
	for _, m := range req {
		if !known[m.ID] {
			d.regen = false
			break
		}
	}
	if d.regen && stored[p-1].Role == message.Assistant {
		return none // nothing to answer: it ends with an answer
	}
	return d
}

// unanswered reports whether tail, what the thread holds after its last
// user message, gives that message no answer yet: nothing, or only tool
// steps (a turn still running, or paused), or an answer a cancel cut short
// (a Stop, an interrupt).
func unanswered(tail []*message.Message) bool {
	for _, m := range tail {
		if m.Role == message.Assistant && len(m.ToolCalls) == 0 && !m.Cancelled {
			return false
		}
	}
	return true
}

// divergeByContent is diverge for a client that does not name its
// messages: by the user messages of both, in order.
func divergeByContent(stored, req []*message.Message, sent []message.Message) divergence {
	none := divergence{sent: sent}
	var su, ru []int // the user messages' indexes
	for i, m := range stored {
		if m.Role == message.User {
			su = append(su, i)
		}
	}
	history := false
	for i, m := range req {
		switch m.Role {
		case message.User:
			ru = append(ru, i)
		case message.Assistant:
			history = true
		}
	}
	k := 0
	for k < len(su) && k < len(ru) && sameUser(stored[su[k]], req[ru[k]]) {
		k++
	}
	// regen: the request ends with the k-th stored user message and
	// leaves out what answered it.
	regen := func() divergence {
		last := su[k-1]
		if ru[k-1] != len(req)-1 || last == len(stored)-1 {
			return none
		}
		return divergence{from: stored[last].Seq, regen: true}
	}
	// at is the index in sent of the message req[i] points to.
	at := func(i int) int {
		for j := range sent {
			if &sent[j] == req[i] {
				return j
			}
		}
		return 0
	}
	switch {
	case k == len(ru) && k > 0 && history:
		return regen()
	case k == len(su) && k > 0 && (history || (len(ru) > k && unanswered(stored[su[k-1]+1:]))):
		// The conversation and more: what follows the last stored user
		// message and the last answer is new (a user message the stored
		// turn holds, one it left unanswered, is not sent again: a
		// follow-up sent while the turn ran, or after it was stopped).
		from := ru[k-1]
		for i := len(req) - 1; i > from; i-- {
			if req[i].Role == message.Assistant {
				from = i
				break
			}
		}
		return divergence{sent: sent[at(from)+1:]}
	case k == len(su) || k == len(ru) || !history:
		return none // the conversation and more, or new messages only
	}
	// The request's messages from its k-th user message on.
	d := divergence{from: store.FromStart, sent: sent[at(ru[k]):]}
	if i := su[k]; i > 0 {
		d.from = stored[i-1].Seq
	}
	return d
}
