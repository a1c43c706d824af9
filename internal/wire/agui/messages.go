package agui

import (
	"encoding/json"
	"strconv"

	"github.com/stackbone/stackbone/internal/message"
)

// wireMessages renders a canonical conversation as AG-UI messages (the
// payload of MESSAGES_SNAPSHOT). Every message keeps its id, so a client
// reconciling by id keeps what it streamed. Context summaries (the
// summarize policy's stored messages) are left out.
//
// With reasoning (a client of AG-UI 1.0 or later), an assistant message's
// shown reasoning blocks come as "reasoning" messages with the ids their
// live REASONING_* events had (reasoningID), around it where they streamed:
// those before its first tool call ahead of it, the rest after it. A 1.0
// client's reducer keeps the reasoning it holds only when a snapshot has
// none, so a snapshot with reasoning holds all of it. An older client
// (whose schema knows no "reasoning" role) gets none.
func wireMessages(msgs []message.Message, reasoning bool) []wireMessage {
	out := make([]wireMessage, 0, len(msgs))
	for _, m := range msgs {
		if m.ID == "" || m.Summarizes != "" {
			continue // a context summary is the engine's, not a turn
		}
		w := wireMessage{ID: m.ID, Role: string(m.Role)}
		var after []wireMessage // reasoning that followed a tool call
		if m.TaskCallID != "" {
			w.SubagentRunID = subagentRunID(m.TaskCallID)
		}
		switch m.Role {
		case message.System:
			w.Content = jsonString(m.Content)
		case message.User:
			w.Content = userContent(m)
		case message.Assistant:
			if reasoning {
				n := 0
				for _, r := range m.Reasoning {
					if !r.Shown() {
						continue
					}
					n++
					rm := wireMessage{ID: reasoningID(m.ID, n), Role: "reasoning", Content: jsonString(r.Text), SubagentRunID: w.SubagentRunID}
					if r.AfterCalls > 0 {
						after = append(after, rm)
					} else {
						out = append(out, rm)
					}
				}
			}
			if m.Content != "" {
				w.Content = jsonString(m.Content)
			}
			for _, c := range m.ToolCalls {
				args := c.Arguments
				if args == "" {
					args = "{}"
				}
				w.ToolCalls = append(w.ToolCalls, wireToolCall{ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name, Arguments: args}})
			}
		case message.Tool:
			w.Content = jsonString(m.Content)
			w.ToolCallID = m.ToolCallID
			if m.IsError {
				w.Error = m.Content
				if w.Error == "" {
					w.Error = "The tool failed."
				}
			}
		default:
			continue
		}
		out = append(out, w)
		out = append(out, after...)
	}
	return out
}

// reasoningID is the AG-UI id of the n-th (from 1) shown reasoning block of
// assistant message msgID: the same in the live REASONING_* events and in
// every MESSAGES_SNAPSHOT, so a client reconciling by id keeps one copy.
func reasoningID(msgID string, n int) string {
	return msgID + "-reasoning-" + strconv.Itoa(n)
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// userContent is a string, or text and image parts when the message carries
// images.
func userContent(m message.Message) json.RawMessage {
	if len(m.Parts) == 0 {
		return jsonString(m.Content)
	}
	var parts []wirePart
	if m.Content != "" {
		text := m.Content
		parts = append(parts, wirePart{Type: "text", Text: &text})
	}
	for _, p := range m.Parts {
		if p.Type != "image" {
			continue
		}
		switch {
		case p.Data != "":
			mt := p.MediaType
			if mt == "" {
				mt = "application/octet-stream"
			}
			parts = append(parts, wirePart{Type: "image", Source: &wireSource{Type: "data", Value: p.Data, MimeType: mt}})
		case p.URL != "":
			parts = append(parts, wirePart{Type: "image", Source: &wireSource{Type: "url", Value: p.URL, MimeType: p.MediaType}})
		}
	}
	if len(parts) == 0 {
		return jsonString(m.Content)
	}
	b, _ := json.Marshal(parts)
	return b
}
