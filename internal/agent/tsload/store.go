package tsload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dop251/goja"

	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/tool"
)

// storeArgs is what the prelude's ctx.store sends host.store, as JSON.
type storeArgs struct {
	Namespace []string        `json:"namespace"`
	Key       *string         `json:"key"`
	Value     json.RawMessage `json:"value"`
	Options   struct {
		// TTL is in minutes, as LangGraph's store has it.
		TTL   *float64        `json:"ttl"`
		Index json.RawMessage `json:"index"`
		// RefreshTTL renews the TTL of what a get or search returns.
		RefreshTTL bool                       `json:"refreshTtl"`
		Query      string                     `json:"query"`
		Filter     map[string]json.RawMessage `json:"filter"`
		Limit      int                        `json:"limit"`
		Offset     int                        `json:"offset"`
		Suffix     []string                   `json:"suffix"`
		MaxDepth   int                        `json:"maxDepth"`
	} `json:"options"`
}

// jsItem is an item as ctx.store returns it.
type jsItem struct {
	Namespace []string        `json:"namespace"`
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
	ExpiresAt *time.Time      `json:"expiresAt,omitempty"`
	Score     *float64        `json:"score,omitempty"`
}

func toJSItem(it store.MemoryItem) jsItem {
	return jsItem{Namespace: it.Namespace, Key: it.Key, Value: it.Value, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		ExpiresAt: it.ExpiresAt, Score: it.Score}
}

// hostStore is __host.store(op, argsJSON) -> Promise of the result's JSON
// text ("" for none): one operation of ctx.store on the call's memory
// store (tool.Call.Store), run on its own goroutine under the call's
// context.
func (r *jsRuntime) hostStore(c goja.FunctionCall) goja.Value {
	p, resolve, reject := r.vm.NewPromise()
	cs := r.cur
	op := c.Argument(0).String()
	fail := func(msg string) goja.Value {
		_ = reject(r.vm.NewGoError(fmt.Errorf("ctx.store.%s: %s", op, msg)))
		return r.vm.ToValue(p)
	}
	switch {
	case cs == nil:
		return fail("only available while a tool runs")
	case cs.mem == nil:
		return fail("this server has no memory store")
	}
	var a storeArgs
	if err := json.Unmarshal([]byte(c.Argument(1).String()), &a); err != nil {
		return fail("namespace must be an array of strings, key a string and value an object")
	}
	run, err := storeCall(op, a)
	if err != nil {
		return fail(err.Error())
	}
	mem := cs.mem
	cs.pending()
	cs.inflight++
	go func() {
		out, err := run(cs.ctx, mem)
		job := func() error {
			cs.inflight--
			if err != nil {
				return reject(r.vm.NewGoError(fmt.Errorf("ctx.store.%s: %s", op, storeErrText(err))))
			}
			return resolve(out)
		}
		select {
		case cs.jobs <- job:
		case <-cs.done:
		}
	}()
	return r.vm.ToValue(p)
}

// storeErrText is what a tool sees of a store error: a refused request's
// reason, else the error.
func storeErrText(err error) string {
	var me *store.MemoryError
	if errors.As(err, &me) {
		return me.Error()
	}
	return err.Error()
}

// storeCall checks a ctx.store operation's arguments and returns the
// operation, which answers the JSON text the promise settles with.
func storeCall(op string, a storeArgs) (func(context.Context, tool.Memory) (string, error), error) {
	key := ""
	if a.Key != nil {
		key = *a.Key
	}
	needKey := func() error {
		if a.Key == nil {
			return errors.New("key must be a string")
		}
		return nil
	}
	o := a.Options
	switch op {
	case "put":
		if err := needKey(); err != nil {
			return nil, err
		}
		po := tool.MemoryPut{}
		if o.TTL != nil {
			if *o.TTL < 0 || math.IsNaN(*o.TTL) || math.IsInf(*o.TTL, 0) {
				return nil, errors.New("ttl must be a positive number of minutes")
			}
			po.TTL = time.Duration(*o.TTL * float64(time.Minute))
		}
		switch idx := string(o.Index); idx {
		case "", "null", "true":
		case "false":
			po.NoIndex = true
		default:
			if err := json.Unmarshal(o.Index, &po.Index); err != nil {
				return nil, errors.New("index must be false or an array of field paths")
			}
		}
		return func(ctx context.Context, m tool.Memory) (string, error) {
			_, err := m.Put(ctx, a.Namespace, key, a.Value, po)
			return "", err
		}, nil
	case "get":
		if err := needKey(); err != nil {
			return nil, err
		}
		return func(ctx context.Context, m tool.Memory) (string, error) {
			it, err := m.Get(ctx, a.Namespace, key, o.RefreshTTL)
			if err != nil || it == nil {
				return "null", err
			}
			return marshal(toJSItem(*it))
		}, nil
	case "delete":
		if err := needKey(); err != nil {
			return nil, err
		}
		return func(ctx context.Context, m tool.Memory) (string, error) {
			return "", m.Delete(ctx, a.Namespace, key)
		}, nil
	case "search":
		so := tool.MemorySearch{Query: o.Query, Filter: o.Filter, Limit: o.Limit, Offset: o.Offset, Refresh: o.RefreshTTL}
		return func(ctx context.Context, m tool.Memory) (string, error) {
			items, err := m.Search(ctx, a.Namespace, so)
			if err != nil {
				return "", err
			}
			out := make([]jsItem, 0, len(items))
			for _, it := range items {
				out = append(out, toJSItem(it))
			}
			return marshal(out)
		}, nil
	case "listNamespaces":
		lo := tool.MemoryNamespaces{Suffix: o.Suffix, MaxDepth: o.MaxDepth, Limit: o.Limit, Offset: o.Offset}
		return func(ctx context.Context, m tool.Memory) (string, error) {
			nss, err := m.ListNamespaces(ctx, a.Namespace, lo)
			if err != nil {
				return "", err
			}
			if nss == nil {
				nss = [][]string{}
			}
			return marshal(nss)
		}, nil
	}
	return nil, fmt.Errorf("unknown operation %q", op)
}

func marshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
