package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"

	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// Names of the built-in memory tools (agent file `memory`).
const (
	Remember = "remember"
	Recall   = "recall"
	Forget   = "forget"
)

// UserPlaceholder in a namespace label is replaced by the turn's end user
// (tool.Call.UserID: the signed-in user, else the x-stackbone-user header),
// or AnonymousUser when the turn has none.
const UserPlaceholder = "{userId}"

// AnonymousUser stands for the user of a turn that names none.
const AnonymousUser = "anonymous"

// DefaultNamespace is the namespace of `memory: true`.
var DefaultNamespace = []string{"users", UserPlaceholder}

// recallLimit is how many memories recall returns.
const recallLimit = 5

// Namespace is the namespace template with the call's user filled in.
func Namespace(template []string, user string) []string {
	if user == "" {
		user = AnonymousUser
	}
	// A label holds no '.' (the namespace separator): a signed-in user's
	// id may (a token's sub), so it is escaped, as is the escape.
	user = strings.NewReplacer("%", "%25", ".", "%2E").Replace(user)
	out := make([]string, len(template))
	for i, l := range template {
		out[i] = strings.ReplaceAll(l, UserPlaceholder, user)
	}
	return out
}

// errNoStore is what a memory tool says when the server has no store.
var errNoStore = errors.New("this server has no memory store")

// Tools returns remember, recall and forget over the namespace template
// (DefaultNamespace when nil): facts kept across threads, as items
// {"fact": "..."} of the call's store (tool.Call.Store).
func Tools(template []string) []*tool.Tool {
	if template == nil {
		template = DefaultNamespace
	}
	ns := func(c tool.Call) []string { return Namespace(template, c.UserID) }
	return []*tool.Tool{
		{
			Name: Remember,
			Description: "Remember a fact for later conversations (they do not see this one). Keep facts short and self-contained. " +
				"Give a key to replace what was remembered under it.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string","minLength":1,"description":"The fact, in a sentence."},` +
				`"key":{"type":"string","description":"A short name for the fact (optional; reuse it to update the fact)."}},"required":["fact"]}`),
			// The key of a call without one is derived from its
			// idempotency key: running it again writes the same item.
			Idempotent: true,
			Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				var a struct{ Fact, Key string }
				if err := json.Unmarshal(c.Args, &a); err != nil {
					return tool.Result{}, err
				}
				if c.Store == nil {
					return tool.Result{}, errNoStore
				}
				if a.Key == "" {
					sum := sha256.Sum256([]byte(c.IdempotencyKey))
					a.Key = "mem_" + hex.EncodeToString(sum[:8])
				}
				value, _ := json.Marshal(map[string]string{"fact": a.Fact})
				if _, err := c.Store.Put(ctx, ns(c), a.Key, value, tool.MemoryPut{Index: []string{"fact"}}); err != nil {
					return tool.Result{}, publicErr(err)
				}
				return jsonResult(map[string]string{"remembered": a.Key})
			},
		},
		{
			Name:        Recall,
			Description: "Recall facts remembered in earlier conversations that are relevant to a query (the most relevant first).",
			Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to recall; empty: the latest facts."}},` +
				`"required":["query"]}`),
			Idempotent: true,
			Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				var a struct{ Query string }
				if err := json.Unmarshal(c.Args, &a); err != nil {
					return tool.Result{}, err
				}
				if c.Store == nil {
					return tool.Result{}, errNoStore
				}
				items, err := c.Store.Search(ctx, ns(c), tool.MemorySearch{Query: a.Query, Limit: recallLimit})
				if err != nil {
					return tool.Result{}, publicErr(err)
				}
				type memory struct {
					Key   string   `json:"key"`
					Fact  string   `json:"fact"`
					Score *float64 `json:"score,omitempty"`
				}
				out := struct {
					Memories []memory `json:"memories"`
				}{Memories: []memory{}}
				for _, it := range items {
					var v struct{ Fact string }
					_ = json.Unmarshal(it.Value, &v)
					if v.Fact == "" {
						v.Fact = string(it.Value)
					}
					out.Memories = append(out.Memories, memory{Key: it.Key, Fact: v.Fact, Score: it.Score})
				}
				return jsonResult(out)
			},
		},
		{
			Name:        Forget,
			Description: "Forget a remembered fact, by the key remember or recall gave.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"key":{"type":"string","minLength":1}},"required":["key"]}`),
			Idempotent:  true,
			Execute: func(ctx context.Context, c tool.Call) (tool.Result, error) {
				var a struct{ Key string }
				if err := json.Unmarshal(c.Args, &a); err != nil {
					return tool.Result{}, err
				}
				if c.Store == nil {
					return tool.Result{}, errNoStore
				}
				if err := c.Store.Delete(ctx, ns(c), a.Key); err != nil {
					return tool.Result{}, publicErr(err)
				}
				return jsonResult(map[string]string{"forgotten": a.Key})
			},
		},
	}
}

func jsonResult(v any) (tool.Result, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return tool.Result{}, err
	}
	return tool.Result{Content: string(b)}, nil
}

// publicErr is what the model sees of a store error: a refused item's
// reason, else a short sentence (the detail goes to the log through the
// engine).
func publicErr(err error) error {
	var me *store.MemoryError
	if errors.As(err, &me) {
		return me
	}
	var ee *EmbedError
	if errors.As(err, &ee) {
		return errors.New("the embedding model failed; try again later")
	}
	return err
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
