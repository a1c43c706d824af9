// Package wire is the contract between the server's one turn handler and
// each wire (openai, anthropic, agui): a wire decodes a request into a Turn
// for the engine and encodes the run's events (and errors) in its own
// format; the server reads the body, authenticates, starts the run, sends
// keepalives and maps errors. Wire packages import this package, never
// internal/server.
package wire

import (
	"context"
	"fmt"
	"net/http"

	"github.com/stackbone/stackbone/internal/apierror"
	"github.com/stackbone/stackbone/internal/engine"
	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/wire/httpjson"
)

// Encoder writes one turn's response in a wire's format. Write encodes an
// event of the run (an error means the client is gone); Close ends the
// response: with nil once the run's terminal event was written, else with
// the error to report (a run that ended without a terminal event). A
// streaming encoder reports errors in-stream and returns nil; a
// non-streaming one returns the run's error for the wire's error envelope.
type Encoder interface {
	Write(e event.Event) error
	Close(err *apierror.Error) error
}

// Flusher is an Encoder whose writes wait for Flush: the turn loop flushes
// after an event when the run has no further event ready, so a burst of
// events reaches the client in one write and a lone event at once.
type Flusher interface {
	Flush() error
}

// Pinger is an Encoder that streams: it gets a keepalive every
// Server.KeepAliveInterval (the one keepalive mechanism), concurrently with Write.
type Pinger interface {
	Ping() error
}

// Turn is one turn request a wire decoded.
type Turn interface {
	// Input is the turn for the engine; the server fills the caller (and,
	// for wires that take it from headers, the session).
	Input() engine.Input
	// Param places an engine input error on the wire's own parameter
	// path: field and index as in engine.InputError ("" keeps the field).
	Param(field string, index int) string
	// Encoder makes the turn's response writer once its run started.
	Encoder(w http.ResponseWriter, run *engine.Run) Encoder
}

// Resumer is a Turn that may answer pending decisions (AG-UI's resume):
// when Answers is not empty the turn resumes the thread's run with them.
type Resumer interface {
	Answers() (via string, answers []engine.Answer)
}

// SessionHeader makes a turn durable in the named thread, on the wires
// that take their thread from headers.
const SessionHeader = "x-stackbone-session"

// IdempotencyKeyHeader names a turn for its retries: a retry of a stateless
// turn with the same key continues it from its recorded tool steps; on a
// session, a request with the key of the thread's last turn attaches to that
// turn (its answer, or the attempt still running) instead of starting another.
const IdempotencyKeyHeader = "Idempotency-Key"

// ApprovalHeader chooses, per request, what a durable turn's request does
// when the turn pauses on a human decision: "wait" holds it open until the
// decision is made out of band and goes on with the resumed turn (bounded
// by STACKBONE_APPROVAL_WAIT), "pause" ends it with the pending call (the
// default). Without it the agent file's approvalMode decides. A wire whose
// clients resolve decisions in the stream (Interrupter) ignores it.
const ApprovalHeader = "x-stackbone-approval"

// Interrupter is a Wire whose clients resolve a paused turn's decisions
// themselves, in the stream (AG-UI's interrupts): its turns never wait for
// a decision in-band, whatever the agent's approvalMode.
type Interrupter interface {
	ResolvesInterrupts() bool
}

// TextJoiner concatenates the assistant text of every step of a turn into
// one answer, separating steps (messages) with a blank line: the answer of
// the wires that return one text (Chat Completions, Anthropic, MCP).
type TextJoiner struct {
	lastMsg string
	any     bool
}

// Piece returns the text to add for a text delta, with the separator before
// the first delta of a later message.
func (j *TextJoiner) Piece(e event.Event) string {
	if e.MessageID != j.lastMsg {
		j.lastMsg = e.MessageID
		if j.any {
			return "\n\n" + e.Delta
		}
	}
	j.any = true
	return e.Delta
}

// Preparer is a Turn that finishes its input once the caller is known: the
// server calls Prepare with the tenant, the caller and (on wires whose
// SessionHeader is true) the header's thread and key filled in, and starts
// the run with what it returns. The Responses wire resolves the thread a
// previous_response_id continues here.
type Preparer interface {
	Prepare(ctx context.Context, in engine.Input) (engine.Input, error)
}

// Replayer is a Turn that Prepare may find to be answered by a run other
// than a new turn's (a Responses request retried after its conversation
// went on): when Replay returns a run, the server encodes it instead of
// starting the turn; nil starts the turn.
type Replayer interface {
	Replay(ctx context.Context) (*engine.Run, error)
}

// Wire is what a wire package implements for the server, which mounts
// every wire the same way (server.Mount); a wire never imports the server.
type Wire interface {
	// TurnRoute is the pattern of the wire's turn endpoint.
	TurnRoute() string
	// DecodeTurn reads a turn request (r carries path values).
	DecodeTurn(r *http.Request, body []byte) (Turn, error)
	// WriteError writes an error response in the wire's envelope.
	WriteError(w http.ResponseWriter, e *apierror.Error) error
	// SessionHeader reports whether a turn's thread comes from the
	// x-stackbone-session header (and a stateless turn's retries from
	// Idempotency-Key), as on the chat wires, rather than from the body.
	SessionHeader() bool
	// Routes are the wire's other routes (pattern → handler), served with
	// the same middleware and error envelope.
	Routes() map[string]func(w http.ResponseWriter, r *http.Request) error
}

// RunStreamer is a Wire that streams a durable turn again in its own
// streaming format, for a UI that reattaches after a reload (GET
// /v1/threads/{id}/runs/{run}/stream?format=NAME): the turn's events from
// its first on, then live to its end, through the same encoder as the
// wire's streaming turns.
type RunStreamer interface {
	// StreamFormat is the format's name (the route's ?format=).
	StreamFormat() string
	// Snapshots reports whether the format's clients rebuild their view
	// from the stream (AG-UI): the turn comes with the thread's state and
	// messages snapshots, as a turn of the wire's own does.
	Snapshots() bool
	// RunEncoder makes the stream's writer for a turn the wire did not
	// decode; r is the route's request (a format's own parameters, such
	// as Responses' starting_after).
	RunEncoder(w http.ResponseWriter, r *http.Request, rs RunStream) (Encoder, error)
}

// RunStream is the turn a RunStreamer streams.
type RunStream struct {
	Tenant, ThreadID string
	// RunID is the run the client named; Agent the thread's agent (the
	// model of the chat formats).
	RunID, Agent string
	// TurnSeq is the sequence number of the turn's first event.
	TurnSeq int64
}

// Collect is the Encoder of a non-streaming answer: add folds each event
// of the run in, and Close writes result as one JSON body with status 200,
// or returns the run's error for the wire's error envelope.
func Collect[T any](w http.ResponseWriter, add func(event.Event), result func() (T, error)) Encoder {
	return &collected[T]{w: w, add: add, result: result}
}

type collected[T any] struct {
	w      http.ResponseWriter
	add    func(event.Event)
	result func() (T, error)
}

func (c *collected[T]) Write(e event.Event) error { c.add(e); return nil }

func (c *collected[T]) Close(err *apierror.Error) error {
	if err != nil {
		return err
	}
	res, rerr := c.result()
	if rerr != nil {
		return rerr
	}
	return httpjson.Write(c.w, http.StatusOK, res)
}

// Param places an engine input error on a request's own paths: a client
// tool's error at tool(index), a message's tool call id at
// fmt.Sprintf(toolCallAt, i), i being the request message the engine
// message came from: origin[index] (-1: none), or index itself when origin
// is nil (the engine's messages are the request's, in order). Other fields
// keep the engine's name ("").
func Param(field string, index int, tool func(int) string, origin []int, toolCallAt string) string {
	switch field {
	case engine.FieldTools:
		return tool(index)
	case engine.FieldToolCallID:
		if origin == nil {
			return fmt.Sprintf(toolCallAt, index)
		}
		if index >= 0 && index < len(origin) && origin[index] >= 0 {
			return fmt.Sprintf(toolCallAt, origin[index])
		}
	}
	return ""
}
