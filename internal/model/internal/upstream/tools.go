package upstream

import (
	"sync"

	"github.com/stackbone/stackbone/internal/model"
)

// maxCachedTools bounds a ToolCache; it is emptied when full. An agent's
// tools stay in it across calls; a client's tools, new in every request,
// come and go.
const maxCachedTools = 1024

// ToolCache holds the encoded form of the tool definitions a provider has
// sent: an agent's tools are the same ToolDef values (the same Parameters
// bytes) in every step, so each is checked, compacted and encoded once.
// A tool is known by its name, description and the identity of its
// Parameters bytes (kept alive by the key, so a reloaded agent's new
// schemas are new keys); Parameters are never modified once built
// (model.ToolDef). It is safe for concurrent use.
type ToolCache struct {
	encode func(model.ToolDef) ([]byte, error)
	mu     sync.Mutex
	m      map[toolKey][]byte
}

type toolKey struct {
	name, description string
	params            *byte
	n                 int
}

// NewToolCache returns a cache encoding a tool with encode.
func NewToolCache(encode func(model.ToolDef) ([]byte, error)) *ToolCache {
	return &ToolCache{encode: encode}
}

func keyOf(t model.ToolDef) toolKey {
	k := toolKey{name: t.Name, description: t.Description, n: len(t.Parameters)}
	if len(t.Parameters) > 0 {
		k.params = &t.Parameters[0]
	}
	return k
}

// Encode returns the encoded form of each of defs, in order, or the first
// error of encoding one.
func (c *ToolCache) Encode(defs []model.ToolDef) ([][]byte, error) {
	out := make([][]byte, len(defs))
	missing := false
	c.mu.Lock()
	for i, t := range defs {
		out[i] = c.m[keyOf(t)]
		missing = missing || out[i] == nil
	}
	c.mu.Unlock()
	if !missing {
		return out, nil
	}
	for i, t := range defs {
		if out[i] != nil {
			continue
		}
		enc, err := c.encode(t)
		if err != nil {
			return nil, err
		}
		out[i] = enc
		c.mu.Lock()
		if c.m == nil || len(c.m) >= maxCachedTools {
			c.m = make(map[toolKey][]byte)
		}
		c.m[keyOf(t)] = enc
		c.mu.Unlock()
	}
	return out, nil
}
