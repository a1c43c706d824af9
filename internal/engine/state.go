package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/wI2L/jsondiff"
)

// Diff returns the RFC 6902 patch that turns state a into state b.
func Diff(a, b json.RawMessage) (json.RawMessage, error) {
	p, err := jsondiff.CompareJSON(nonEmpty(a), nonEmpty(b))
	if err != nil {
		return nil, fmt.Errorf("diff state: %w", err)
	}
	if p == nil {
		return json.RawMessage(`[]`), nil
	}
	return json.Marshal(p)
}

func nonEmpty(s json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(s)) == 0 {
		return json.RawMessage(`{}`)
	}
	return s
}

// jsonEqual compares two JSON documents semantically.
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	p, err := jsondiff.CompareJSON(nonEmpty(a), nonEmpty(b))
	return err == nil && len(p) == 0
}

// mergeState3 applies to current what a tool changed relative to base (the
// state it was given): a three-way merge of objects, recursing into objects
// both sides keep, so concurrent tools of one step (say two write_file calls)
// compose in call order. Arrays and scalars are replaced whole.
func mergeState3(base, current, changed json.RawMessage) (json.RawMessage, error) {
	var b, cur, ch any
	for _, p := range []struct {
		raw json.RawMessage
		dst *any
	}{{base, &b}, {current, &cur}, {changed, &ch}} {
		if err := json.Unmarshal(nonEmpty(p.raw), p.dst); err != nil {
			return nil, fmt.Errorf("state must be JSON: %w", err)
		}
	}
	if _, ok := ch.(map[string]any); !ok {
		return nil, fmt.Errorf("state must be a JSON object")
	}
	return json.Marshal(merge3(b, cur, ch))
}

func merge3(base, cur, ch any) any {
	bm, ok1 := base.(map[string]any)
	cm, ok2 := cur.(map[string]any)
	chm, ok3 := ch.(map[string]any)
	if !ok1 || !ok2 || !ok3 {
		return ch
	}
	out := make(map[string]any, len(cm))
	for k, v := range cm {
		out[k] = v
	}
	for k, v := range chm {
		old, had := bm[k]
		if had && reflect.DeepEqual(old, v) {
			continue
		}
		if !had {
			old = map[string]any{} // a key both sides added: merge what they added
		}
		if c, ok := out[k]; ok {
			out[k] = merge3(old, c, v)
			continue
		}
		out[k] = v
	}
	for k := range bm {
		if _, ok := chm[k]; !ok {
			delete(out, k)
		}
	}
	return out
}
