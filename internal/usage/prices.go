// Package usage prices model calls and holds the budgets turns are checked
// against: the price table (built in for OpenAI's and Anthropic's current
// models, overridable in stackbone.json's "prices"), the cost of a call,
// and stackbone.json's "budgets".
package usage

import (
	"math"
	"sort"
	"strings"

	"github.com/stackbone/stackbone/internal/event"
)

// Price is what a model charges, in US dollars per million tokens.
type Price struct {
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
	// CachedInput prices input tokens read from the prompt cache (nil:
	// as Input).
	CachedInput *float64 `json:"cachedInput,omitempty"`
}

// PricesTaken is the day the built-in prices were read off the providers'
// pricing pages. Prices change: override them in stackbone.json.
const PricesTaken = "2025-11-30"

func cached(v float64) *float64 { return &v }

// builtin are the built-in prices by "provider/model". A dated snapshot
// ("gpt-4o-2024-08-06") takes the price of its model ("gpt-4o").
var builtin = map[string]Price{
	"openai/gpt-5":                {Input: 1.25, Output: 10, CachedInput: cached(0.125)},
	"openai/gpt-5-mini":           {Input: 0.25, Output: 2, CachedInput: cached(0.025)},
	"openai/gpt-5-nano":           {Input: 0.05, Output: 0.4, CachedInput: cached(0.005)},
	"openai/gpt-4.1":              {Input: 2, Output: 8, CachedInput: cached(0.5)},
	"openai/gpt-4.1-mini":         {Input: 0.4, Output: 1.6, CachedInput: cached(0.1)},
	"openai/gpt-4.1-nano":         {Input: 0.1, Output: 0.4, CachedInput: cached(0.025)},
	"openai/gpt-4o":               {Input: 2.5, Output: 10, CachedInput: cached(1.25)},
	"openai/gpt-4o-mini":          {Input: 0.15, Output: 0.6, CachedInput: cached(0.075)},
	"openai/o3":                   {Input: 2, Output: 8, CachedInput: cached(0.5)},
	"openai/o3-mini":              {Input: 1.1, Output: 4.4, CachedInput: cached(0.55)},
	"openai/o4-mini":              {Input: 1.1, Output: 4.4, CachedInput: cached(0.275)},
	"openai/o1":                   {Input: 15, Output: 60, CachedInput: cached(7.5)},
	"anthropic/claude-opus-4-5":   {Input: 5, Output: 25, CachedInput: cached(0.5)},
	"anthropic/claude-opus-4-1":   {Input: 15, Output: 75, CachedInput: cached(1.5)},
	"anthropic/claude-opus-4":     {Input: 15, Output: 75, CachedInput: cached(1.5)},
	"anthropic/claude-sonnet-4-5": {Input: 3, Output: 15, CachedInput: cached(0.3)},
	"anthropic/claude-sonnet-4":   {Input: 3, Output: 15, CachedInput: cached(0.3)},
	"anthropic/claude-3-7-sonnet": {Input: 3, Output: 15, CachedInput: cached(0.3)},
	"anthropic/claude-haiku-4-5":  {Input: 1, Output: 5, CachedInput: cached(0.1)},
	"anthropic/claude-3-5-haiku":  {Input: 0.8, Output: 4, CachedInput: cached(0.08)},
	// Scripted models answer from a file in the process: they cost nothing.
	"scripted/*": {},
}

// Prices is a price table: the built-in prices with the project's on top.
// Keys are "provider/model" or "provider/*" (every model of a provider:
// a local one that costs nothing, say).
type Prices struct {
	byRef map[string]Price
	// refs are byRef's keys, longest first, for prefix matching.
	refs []string
}

// NewPrices returns the built-in prices with over on top (nil: none).
func NewPrices(over map[string]Price) *Prices {
	p := &Prices{byRef: make(map[string]Price, len(builtin)+len(over))}
	for k, v := range builtin {
		p.byRef[k] = v
	}
	for k, v := range over {
		p.byRef[k] = v
	}
	for k := range p.byRef {
		p.refs = append(p.refs, k)
	}
	sort.Slice(p.refs, func(i, j int) bool {
		if len(p.refs[i]) != len(p.refs[j]) {
			return len(p.refs[i]) > len(p.refs[j])
		}
		return p.refs[i] < p.refs[j]
	})
	return p
}

// Lookup finds the price of provider's model: the exact "provider/model",
// else the longest entry the model name extends with "-" (a dated
// snapshot), else "provider/*". ok is false when none is known.
func (p *Prices) Lookup(provider, model string) (Price, bool) {
	if p == nil {
		return Price{}, false
	}
	ref := provider + "/" + model
	if v, ok := p.byRef[ref]; ok {
		return v, true
	}
	for _, k := range p.refs {
		if strings.HasPrefix(ref, k+"-") {
			return p.byRef[k], true
		}
	}
	v, ok := p.byRef[provider+"/*"]
	return v, ok
}

// Cost is what a call with usage u costs at price pr, in billionths of a
// dollar. Cached input tokens are part of u.InputTokens.
func Cost(pr Price, u event.Usage) int64 {
	cachedIn := min(u.CachedInputTokens, u.InputTokens)
	cachedPrice := pr.Input
	if pr.CachedInput != nil {
		cachedPrice = *pr.CachedInput
	}
	// $ per million tokens is a thousandth of a nano-dollar per token.
	n := float64(u.InputTokens-cachedIn)*pr.Input + float64(cachedIn)*cachedPrice + float64(u.OutputTokens)*pr.Output
	return int64(math.Round(n * 1000))
}

// CostOf is the cost of a call of provider's model with usage u, or nil
// when its price is unknown.
func (p *Prices) CostOf(provider, model string, u event.Usage) *int64 {
	pr, ok := p.Lookup(provider, model)
	if !ok {
		return nil
	}
	c := Cost(pr, u)
	return &c
}

// USD turns nano-dollars into dollars.
func USD(nanos int64) float64 { return float64(nanos) / 1e9 }
