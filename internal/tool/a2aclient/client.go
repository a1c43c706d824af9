// Package a2aclient is the client side of A2A 1.0: it reads a remote
// agent's Agent Card (A2A discovery, cached with a TTL), sends it messages
// over the JSON-RPC binding (SendStreamingMessage when the card says it
// streams, else SendMessage), re-attaches to a task it started
// (SubscribeToTask, or GetTask), and folds what comes back into Updates the
// engine reads: the task's state, its answer text as it streams, and the
// questions of an INPUT_REQUIRED status (a Stackbone agent's pending
// decisions, or a plain question).
//
// The remote agents are the ones an agent file lists under a2aAgents
// (agent.A2AAgent); their header values are secrets and never logged.
package a2aclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stackbone/stackbone/internal/eventsource"

	"github.com/stackbone/stackbone/internal/agent"
	"github.com/stackbone/stackbone/internal/remote"
	"github.com/stackbone/stackbone/internal/wire/a2a"
)

// DefaultCardTTL is how long a fetched Agent Card is used before it is
// read again.
const DefaultCardTTL = 5 * time.Minute

// failedCardTTL is how long a card that could not be fetched is not asked
// for again (so a model retrying a delegation does not hammer a server
// that is down).
const failedCardTTL = 5 * time.Second

// MaxCardBytes bounds an Agent Card's body.
const MaxCardBytes = 1 << 20

// MaxEventBytes bounds one response (a SendMessage answer, one event of a
// stream).
const MaxEventBytes = 8 << 20

// WellKnownPath is where A2A discovery finds an agent's card under its
// base URL.
const WellKnownPath = "/.well-known/agent-card.json"

// Client talks to remote A2A agents. The zero value is not usable: use New.
type Client struct {
	http   *http.Client
	log    *slog.Logger
	now    func() time.Time
	ttl    time.Duration
	mu     sync.Mutex
	cards  map[string]cardEntry
	nextID func() string
}

type cardEntry struct {
	card     *a2a.AgentCard
	endpoint string
	err      error
	at       time.Time
}

// Options configure a Client.
type Options struct {
	// HTTP is the client requests go through (nil: one without a total
	// timeout, as streams last as long as the remote task).
	HTTP *http.Client
	// Logger (nil: discard). It must redact the agents' secrets (app's
	// process logger does).
	Logger *slog.Logger
	// Now is the clock of the card cache (nil: time.Now).
	Now func() time.Time
	// CardTTL is how long a card is cached (0: DefaultCardTTL).
	CardTTL time.Duration
}

// New returns a client.
func New(o Options) *Client {
	c := &Client{http: o.HTTP, log: o.Logger, now: o.Now, ttl: o.CardTTL, cards: map[string]cardEntry{}}
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.ttl <= 0 {
		c.ttl = DefaultCardTTL
	}
	var n uint64
	var nmu sync.Mutex
	c.nextID = func() string {
		nmu.Lock()
		defer nmu.Unlock()
		n++
		return fmt.Sprintf("%d", n)
	}
	return c
}

// Error is a failure of a remote agent, with a message safe to show the
// model (no header values; the URL's credentials are redacted by the
// agent's redactor before anyone logs or stores it).
type Error struct {
	Agent   string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("A2A agent %s: %s", e.Agent, e.Message) }

func failf(a agent.A2AAgent, format string, args ...any) *Error {
	return &Error{Agent: a.Name, Message: fmt.Sprintf(format, args...)}
}

// CardURL is where a's card is read: its URL when that names a card (a
// path ending in .json, or under /.well-known/), else the well-known path
// under it.
func CardURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL", raw)
	}
	if strings.HasSuffix(u.Path, ".json") || strings.Contains(u.Path, "/.well-known/") {
		return u.String(), nil
	}
	u.Path = strings.TrimRight(u.Path, "/") + WellKnownPath
	u.RawPath = ""
	return u.String(), nil
}

func cacheKey(a agent.A2AAgent) string {
	h := sha256.New()
	h.Write([]byte(a.URL))
	keys := make([]string, 0, len(a.Headers))
	for k := range a.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Write([]byte{0})
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(a.Headers[k]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Card returns a's Agent Card and the JSON-RPC endpoint it names, from the
// cache while it is fresh.
func (c *Client) Card(ctx context.Context, a agent.A2AAgent) (*a2a.AgentCard, string, error) {
	key := cacheKey(a)
	c.mu.Lock()
	e, ok := c.cards[key]
	c.mu.Unlock()
	now := c.now()
	if ok && ((e.err == nil && now.Sub(e.at) < c.ttl) || (e.err != nil && now.Sub(e.at) < failedCardTTL)) {
		return e.card, e.endpoint, e.err
	}
	card, endpoint, err := c.fetchCard(ctx, a)
	if err != nil && ctx.Err() != nil {
		return nil, "", err // the caller gave up: nothing learnt about the remote
	}
	c.mu.Lock()
	c.cards[key] = cardEntry{card: card, endpoint: endpoint, err: err, at: now}
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("A2A agent card not available", "a2aAgent", a.Name, "err", err)
	} else {
		c.log.Debug("A2A agent card read", "a2aAgent", a.Name, "card", card.Name, "skills", len(card.Skills), "streaming", card.Capabilities.Streaming)
	}
	return card, endpoint, err
}

// Cached returns a's card when one is cached (fresh or not), without
// fetching it.
func (c *Client) Cached(a agent.A2AAgent) *a2a.AgentCard {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cards[cacheKey(a)].card
}

func (c *Client) fetchCard(ctx context.Context, a agent.A2AAgent) (*a2a.AgentCard, string, error) {
	cardURL, err := CardURL(a.URL)
	if err != nil {
		return nil, "", failf(a, "%v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return nil, "", failf(a, "cannot read its agent card: %v", err)
	}
	c.headers(req, a)
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return nil, "", failf(a, "cannot read its agent card at %s: %v", cardURL, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, "", failf(a, "its agent card at %s answered HTTP %d", cardURL, res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxCardBytes+1))
	if err != nil {
		return nil, "", failf(a, "cannot read its agent card at %s: %v", cardURL, err)
	}
	if len(body) > MaxCardBytes {
		return nil, "", failf(a, "its agent card at %s is larger than %d bytes", cardURL, MaxCardBytes)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(body, &card); err != nil {
		return nil, "", failf(a, "its agent card at %s is not a valid Agent Card: %v", cardURL, err)
	}
	var legacy struct {
		URL string `json:"url"`
	}
	_ = json.Unmarshal(body, &legacy)
	endpoint := ""
	for _, in := range card.SupportedInterfaces {
		if strings.EqualFold(in.ProtocolBinding, a2a.BindingJSONRPC) && in.URL != "" {
			endpoint = in.URL
			break
		}
	}
	if endpoint == "" && len(card.SupportedInterfaces) == 0 {
		endpoint = legacy.URL // a card of the 0.3 shape names its one JSON-RPC URL
	}
	if endpoint == "" {
		return nil, "", failf(a, "its agent card at %s names no JSON-RPC interface (this client speaks A2A's JSON-RPC binding)", cardURL)
	}
	base, _ := url.Parse(cardURL)
	ref, err := url.Parse(endpoint)
	if err != nil {
		return nil, "", failf(a, "its agent card names an invalid interface URL %q", endpoint)
	}
	return &card, base.ResolveReference(ref).String(), nil
}

func (c *Client) headers(req *http.Request, a agent.A2AAgent) {
	for k, v := range a.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set(a2a.VersionHeader, a2a.ProtocolVersion)
}

// Summary is what the model is told of a remote agent: the configured
// description, else the card's description and its skills.
func Summary(a agent.A2AAgent, card *a2a.AgentCard) string {
	if a.Description != "" {
		return a.Description
	}
	if card == nil {
		return "A remote A2A agent (its agent card has not been read yet)."
	}
	var b strings.Builder
	b.WriteString(strings.TrimSpace(oneLine(card.Description, 300)))
	if b.Len() == 0 {
		b.WriteString("A remote A2A agent (" + oneLine(card.Name, 80) + ").")
	}
	if len(card.Skills) > 0 {
		b.WriteString(" Skills:")
		for i, s := range card.Skills {
			if i == 8 {
				fmt.Fprintf(&b, " (and %d more)", len(card.Skills)-i)
				break
			}
			sep := "; "
			if i == 0 {
				sep = " "
			}
			b.WriteString(sep + oneLine(s.Name, 80))
			if d := oneLine(s.Description, 160); d != "" && d != s.Name {
				b.WriteString(" (" + d + ")")
			}
		}
		b.WriteString(".")
	}
	return b.String()
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return s
}

// Describe is Summary of a's card, fetching it when it is not cached.
func (c *Client) Describe(ctx context.Context, a agent.A2AAgent) (string, error) {
	if a.Description != "" {
		return a.Description, nil
	}
	card, _, err := c.Card(ctx, a)
	if err != nil {
		return Summary(a, nil), err
	}
	return Summary(a, card), nil
}

// The engine's view of a remote task (package remote).
type (
	// Message is remote.Message.
	Message = remote.Message
	// Decision is remote.Decision.
	Decision = remote.Decision
	// Ask is remote.Ask.
	Ask = remote.Ask
	// Update is remote.Update.
	Update = remote.Update
)

// The states an Update reports.
const (
	StateWorking       = remote.StateWorking
	StateInputRequired = remote.StateInputRequired
	StateAuthRequired  = remote.StateAuthRequired
	StateCompleted     = remote.StateCompleted
	StateFailed        = remote.StateFailed
	StateCanceled      = remote.StateCanceled
	StateRejected      = remote.StateRejected
)

// Terminal is remote.Terminal.
func Terminal(s string) bool { return remote.Terminal(s) }

// fold tracks one task across responses.
type fold struct {
	u     Update
	arts  map[string]string
	order []string
}

func (f *fold) answer() string {
	var parts []string
	for _, id := range f.order {
		if t := f.arts[id]; t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n")
}

func textOf(parts []a2a.Part) string {
	var out []string
	for _, p := range parts {
		switch {
		case p.Text != nil:
			out = append(out, *p.Text)
		case len(p.Data) > 0 && !isInterrupt(p):
			out = append(out, string(p.Data))
		}
	}
	return strings.Join(out, "\n\n")
}

func isInterrupt(p a2a.Part) bool {
	if len(p.Data) == 0 {
		return false
	}
	if v, ok := p.Metadata[a2a.InterruptMetadataKey]; ok && v == "interrupt" {
		return true
	}
	var probe struct {
		AllowedDecisions []string `json:"allowedDecisions"`
	}
	return json.Unmarshal(p.Data, &probe) == nil && len(probe.AllowedDecisions) > 0
}

func (f *fold) status(st a2a.TaskStatus) {
	f.u.State = string(st.State)
	f.u.Asks, f.u.Note = nil, ""
	if st.Message == nil {
		return
	}
	f.u.Note = textOf(st.Message.Parts)
	if !st.State.Interrupted() {
		return
	}
	for _, p := range st.Message.Parts {
		if !isInterrupt(p) {
			continue
		}
		var in a2a.Interrupt
		if json.Unmarshal(p.Data, &in) != nil {
			continue
		}
		f.u.Asks = append(f.u.Asks, Ask{ID: in.ID, ToolCallID: in.ToolCallID, Tool: in.Tool, Args: in.Arguments, Description: in.Description,
			Allowed: in.AllowedDecisions, Schema: in.ResponseSchema, Reason: in.Reason})
	}
}

func (f *fold) artifact(a a2a.Artifact, appendTo bool) string {
	if f.arts == nil {
		f.arts = map[string]string{}
	}
	text := textOf(a.Parts)
	old, seen := f.arts[a.ArtifactID]
	if !seen {
		f.order = append(f.order, a.ArtifactID)
	}
	if appendTo {
		f.arts[a.ArtifactID] = old + text
		return text
	}
	f.arts[a.ArtifactID] = text
	if strings.HasPrefix(text, old) {
		return text[len(old):]
	}
	return text
}

// apply folds one response in; it returns false for one that says nothing
// of the task.
func (f *fold) apply(sr a2a.StreamResponse) bool {
	f.u.Delta = ""
	switch {
	case sr.Task != nil:
		t := sr.Task
		f.u.TaskID, f.u.ContextID = t.ID, t.ContextID
		for _, a := range t.Artifacts {
			f.u.Delta += f.artifact(a, false)
		}
		f.status(t.Status)
	case sr.StatusUpdate != nil:
		f.u.TaskID, f.u.ContextID = sr.StatusUpdate.TaskID, sr.StatusUpdate.ContextID
		f.status(sr.StatusUpdate.Status)
	case sr.ArtifactUpdate != nil:
		f.u.TaskID, f.u.ContextID = sr.ArtifactUpdate.TaskID, sr.ArtifactUpdate.ContextID
		f.u.Delta = f.artifact(sr.ArtifactUpdate.Artifact, sr.ArtifactUpdate.Append)
	case sr.Message != nil:
		// A direct answer without a task: the conversation's reply.
		m := sr.Message
		if m.ContextID != "" {
			f.u.ContextID = m.ContextID
		}
		if m.TaskID != "" {
			f.u.TaskID = m.TaskID
		}
		text := textOf(m.Parts)
		f.order = append(f.order, "message:"+m.MessageID)
		if f.arts == nil {
			f.arts = map[string]string{}
		}
		f.arts["message:"+m.MessageID] = text
		f.u.Delta, f.u.State = text, StateCompleted
	default:
		return false
	}
	if f.u.State == "" {
		f.u.State = StateWorking
	}
	f.u.Answer = f.answer()
	if f.u.Answer == "" && f.u.State == StateCompleted {
		f.u.Answer = f.u.Note // an agent that answers in its final status message
	}
	return true
}

func toA2A(m Message) *a2a.Message {
	out := &a2a.Message{MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID, Role: a2a.RoleUser}
	for _, d := range m.Decisions {
		b, _ := json.Marshal(d)
		out.Parts = append(out.Parts, a2a.Part{Data: b, MediaType: "application/json"})
	}
	if m.Reply != "" {
		out.Parts = append(out.Parts, a2a.TextPart(m.Reply))
	}
	if m.Text != "" || len(out.Parts) == 0 {
		out.Parts = append(out.Parts, a2a.TextPart(m.Text))
	}
	return out
}

// Send sends m to a and yields the task's updates until it ends or waits
// on input (the last update says which). It streams (SendStreamingMessage)
// when the card says the agent does, else it waits for SendMessage's one
// answer.
func (c *Client) Send(ctx context.Context, a agent.A2AAgent, m Message) iter.Seq2[Update, error] {
	return func(yield func(Update, error) bool) {
		card, endpoint, err := c.Card(ctx, a)
		if err != nil {
			yield(Update{}, err)
			return
		}
		params, _ := json.Marshal(a2a.SendMessageRequest{Message: toA2A(m)})
		method := a2a.MethodSendMessage
		if card.Capabilities.Streaming {
			method = a2a.MethodSendStreamingMessage
		}
		c.call(ctx, a, endpoint, method, params, card.Capabilities.Streaming, yield)
	}
}

// Reattach yields the updates of a task Send started (after a restart, or
// a stream that broke): SubscribeToTask when the agent streams, else
// GetTask polled every poll until the task ends or waits on input.
func (c *Client) Reattach(ctx context.Context, a agent.A2AAgent, taskID string, poll time.Duration) iter.Seq2[Update, error] {
	return func(yield func(Update, error) bool) {
		card, endpoint, err := c.Card(ctx, a)
		if err != nil {
			yield(Update{}, err)
			return
		}
		params, _ := json.Marshal(a2a.GetTaskRequest{ID: taskID})
		if card.Capabilities.Streaming {
			// A task that already ended cannot be subscribed to
			// (UnsupportedOperation): then it is read.
			ended := false
			c.call(ctx, a, endpoint, a2a.MethodSubscribeToTask, params, true, func(u Update, err error) bool {
				var re *RPCError
				if errors.As(err, &re) && re.Code == a2a.CodeUnsupportedOperation {
					ended = true
					return false
				}
				return yield(u, err)
			})
			if !ended {
				return
			}
			u, err := c.Get(ctx, a, taskID)
			yield(u, err)
			return
		}
		for {
			var last Update
			ok := true
			c.call(ctx, a, endpoint, a2a.MethodGetTask, params, false, func(u Update, err error) bool {
				if err != nil {
					ok = yield(u, err)
					return false
				}
				last = u
				return true
			})
			if !ok || last.State == "" {
				return
			}
			if Terminal(last.State) || last.State == StateInputRequired || last.State == StateAuthRequired {
				yield(last, nil)
				return
			}
			select {
			case <-ctx.Done():
				yield(Update{}, ctx.Err())
				return
			case <-time.After(poll):
			}
		}
	}
}

// Get reads a task once (GetTask).
func (c *Client) Get(ctx context.Context, a agent.A2AAgent, taskID string) (Update, error) {
	_, endpoint, err := c.Card(ctx, a)
	if err != nil {
		return Update{}, err
	}
	params, _ := json.Marshal(a2a.GetTaskRequest{ID: taskID})
	var out Update
	var outErr error
	c.call(ctx, a, endpoint, a2a.MethodGetTask, params, false, func(u Update, err error) bool {
		out, outErr = u, err
		return false
	})
	return out, outErr
}

// Cancel asks the remote to cancel a task (CancelTask).
func (c *Client) Cancel(ctx context.Context, a agent.A2AAgent, taskID string) error {
	_, endpoint, err := c.Card(ctx, a)
	if err != nil {
		return err
	}
	params, _ := json.Marshal(a2a.GetTaskRequest{ID: taskID})
	var outErr error
	c.call(ctx, a, endpoint, a2a.MethodCancelTask, params, false, func(_ Update, err error) bool {
		outErr = err
		return false
	})
	return outErr
}

// RPCError is remote.RPCError.
type RPCError = remote.RPCError

// call makes one JSON-RPC call and yields the folded updates of its answer
// (one for a plain response; one per event of a stream).
func (c *Client) call(ctx context.Context, a agent.A2AAgent, endpoint, method string, params json.RawMessage, stream bool, yield func(Update, error) bool) {
	body, _ := json.Marshal(a2a.Request{JSONRPC: "2.0", ID: json.RawMessage(`"` + c.nextID() + `"`), Method: method, Params: params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		yield(Update{}, failf(a, "%v", err))
		return
	}
	c.headers(req, a)
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			yield(Update{}, context.Cause(ctx))
			return
		}
		yield(Update{}, failf(a, "%s failed: %v", method, err))
		return
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 2000))
		msg := fmt.Sprintf("%s answered HTTP %d", method, res.StatusCode)
		var env struct {
			Error *a2a.RPCError `json:"error"`
		}
		if json.Unmarshal(b, &env) == nil && env.Error != nil {
			yield(Update{}, &RPCError{Agent: a.Name, Code: env.Error.Code, Message: env.Error.Message})
			return
		}
		yield(Update{}, failf(a, "%s", msg))
		return
	}
	var f fold
	handle := func(b []byte) bool {
		var env struct {
			Result json.RawMessage `json:"result"`
			Error  *a2a.RPCError   `json:"error"`
		}
		if err := json.Unmarshal(b, &env); err != nil {
			return yield(Update{}, failf(a, "%s: invalid JSON-RPC response: %v", method, err))
		}
		if env.Error != nil {
			yield(Update{}, &RPCError{Agent: a.Name, Code: env.Error.Code, Message: env.Error.Message})
			return false
		}
		var sr a2a.StreamResponse
		if method == a2a.MethodGetTask {
			var t a2a.Task
			if err := json.Unmarshal(env.Result, &t); err != nil {
				return yield(Update{}, failf(a, "%s: invalid task: %v", method, err))
			}
			sr.Task = &t
		} else if err := json.Unmarshal(env.Result, &sr); err != nil {
			return yield(Update{}, failf(a, "%s: invalid response: %v", method, err))
		} else if sr.Task == nil && sr.Message == nil && sr.StatusUpdate == nil && sr.ArtifactUpdate == nil {
			// A bare Task (some servers answer SendMessage so).
			var t a2a.Task
			if json.Unmarshal(env.Result, &t) == nil && t.ID != "" {
				sr.Task = &t
			}
		}
		if !f.apply(sr) {
			return true
		}
		return yield(f.u, nil)
	}
	if !stream || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(io.LimitReader(res.Body, MaxEventBytes+1))
		if err != nil {
			yield(Update{}, failf(a, "%s: %v", method, err))
			return
		}
		if len(b) > MaxEventBytes {
			yield(Update{}, failf(a, "%s: the response is larger than %d bytes", method, MaxEventBytes))
			return
		}
		handle(b)
		return
	}
	r := eventsource.NewReader(res.Body, MaxEventBytes)
	defer r.Release()
	for {
		_, data, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				yield(Update{}, context.Cause(ctx))
				return
			}
			yield(Update{}, &BrokenError{Agent: a.Name, Err: err})
			return
		}
		if !handle(data) {
			return
		}
	}
	if !Terminal(f.u.State) && f.u.State != StateInputRequired && f.u.State != StateAuthRequired {
		yield(Update{}, &BrokenError{Agent: a.Name, Err: errors.New("the stream ended before the task did")})
	}
}

// BrokenError is remote.BrokenError.
type BrokenError = remote.BrokenError
