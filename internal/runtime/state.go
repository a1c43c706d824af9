package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"

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

// mergeTopLevel applies to current the top-level keys a tool changed relative
// to base (the state it was given), so concurrent tools of one step compose
// in call order.
func mergeTopLevel(base, current, changed json.RawMessage) (json.RawMessage, error) {
	var b, cur, ch map[string]json.RawMessage
	for _, p := range []struct {
		raw json.RawMessage
		dst *map[string]json.RawMessage
	}{{base, &b}, {current, &cur}, {changed, &ch}} {
		*p.dst = map[string]json.RawMessage{}
		if err := json.Unmarshal(nonEmpty(p.raw), p.dst); err != nil {
			return nil, fmt.Errorf("state must be a JSON object: %w", err)
		}
	}
	for k, v := range ch {
		if old, ok := b[k]; !ok || !jsonEqual(old, v) {
			cur[k] = v
		}
	}
	for k := range b {
		if _, ok := ch[k]; !ok {
			delete(cur, k)
		}
	}
	return json.Marshal(cur)
}
