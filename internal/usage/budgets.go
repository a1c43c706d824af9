package usage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

// Budget scopes.
const (
	ScopeTenant = "tenant"
	ScopeKey    = "key"
	ScopeAgent  = "agent"
)

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Budget is a limit on the tokens and/or dollars spent in a period (UTC
// days or months) by a tenant, a key (by label) or an agent.
type Budget struct {
	Name string `json:"name"`
	// Scope is ScopeTenant, ScopeKey or ScopeAgent; Match is the key label
	// or agent name it limits (not for ScopeTenant).
	Scope string `json:"scope"`
	Match string `json:"match,omitempty"`
	// Tenant, when set, limits the budget to one tenant; else it applies
	// to each tenant on its own.
	Tenant string `json:"tenant,omitempty"`
	// Period is PeriodDay or PeriodMonth.
	Period string   `json:"period"`
	Tokens *int64   `json:"tokens,omitempty"`
	USD    *float64 `json:"usd,omitempty"`
}

// Applies reports whether b limits turns of tenant's key on agent.
func (b Budget) Applies(tenant, agent, key string) bool {
	if b.Tenant != "" && b.Tenant != tenant {
		return false
	}
	switch b.Scope {
	case ScopeKey:
		return b.Match == key
	case ScopeAgent:
		return b.Match == agent
	}
	return true
}

// Bounds returns the start of b's period holding now and the start of the
// next (UTC).
func (b Budget) Bounds(now time.Time) (from, to time.Time) {
	now = now.UTC()
	if b.Period == PeriodMonth {
		from = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		return from, from.AddDate(0, 1, 0)
	}
	from = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 0, 1)
}

// Filter is the usage filter of b's spending in tenant from from on.
func (b Budget) Filter(tenant string, from time.Time) store.UsageFilter {
	f := store.UsageFilter{Tenant: tenant, From: from}
	switch b.Scope {
	case ScopeKey:
		f.Key = b.Match
	case ScopeAgent:
		f.Agent = b.Match
	}
	return f
}

// Status is how much of a budget is used in its current period.
type Status struct {
	Budget
	UsedTokens int64
	UsedNanos  int64
	From       time.Time
	ResetsAt   time.Time
	Exceeded   bool
}

// Status reads b's use in tenant's current period (from the store's daily
// sums: a read of a few rows a day of the period).
func (b Budget) Status(ctx context.Context, st store.Store, tenant string, now time.Time) (Status, error) {
	from, to := b.Bounds(now)
	u, err := st.DailyUsage(ctx, b.Filter(tenant, from))
	if err != nil {
		return Status{}, err
	}
	s := Status{Budget: b, From: from, ResetsAt: to}
	s.UsedTokens = int64(u.Usage.InputTokens + u.Usage.OutputTokens)
	s.UsedNanos = u.CostNanos
	s.Exceeded = (b.Tokens != nil && s.UsedTokens >= *b.Tokens) ||
		(b.USD != nil && s.UsedNanos >= int64(math.Round(*b.USD*1e9)))
	return s, nil
}

// NoticeID is the webhook id of the budget.exceeded notice of b in tenant's
// period from from: the same on every replica, so the notice goes out once
// per limit and period.
func (b Budget) NoticeID(tenant string, from time.Time) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + b.Name + "\x00" + from.UTC().Format(time.RFC3339)))
	return "msg_budget_" + hex.EncodeToString(sum[:12])
}

// ExceededError refuses a turn (or stops a run between steps) whose
// budget is spent: 429 budget_exceeded until ResetsAt.
type ExceededError struct {
	Status
	// Wait is the time left until the period resets.
	Wait time.Duration
}

// Error implements error.
func (e *ExceededError) Error() string {
	what := ""
	switch {
	case e.Tokens != nil && e.UsedTokens >= *e.Tokens:
		what = fmt.Sprintf("%d of %d tokens used", e.UsedTokens, *e.Tokens)
	case e.USD != nil:
		what = fmt.Sprintf("$%.4f of $%.2f used", USD(e.UsedNanos), *e.USD)
	}
	return fmt.Sprintf("The %s budget %q is spent (%s); it resets at %s.", e.Period, e.Name, what, e.ResetsAt.Format(time.RFC3339))
}

// File is the part of stackbone.json this package reads.
type File struct {
	Prices  map[string]Price `json:"prices"`
	Budgets []Budget         `json:"budgets"`
}

// LoadFile reads the prices and budgets of DIR/stackbone.json (a missing
// file: none), checking each budget.
func LoadFile(dir string) (File, error) {
	path := filepath.Join(dir, "stackbone.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return File{}, nil
	}
	if err != nil {
		return File{}, err
	}
	var f File
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&f); err != nil {
		return File{}, fmt.Errorf("%s: not valid JSON: %w", path, err)
	}
	var errs []error
	names := map[string]bool{}
	for i, bu := range f.Budgets {
		field := fmt.Sprintf("%s: budgets[%d]", path, i)
		switch {
		case bu.Name == "":
			errs = append(errs, fmt.Errorf("%s.name: missing", field))
		case names[bu.Name]:
			errs = append(errs, fmt.Errorf("%s.name: %q is named twice", field, bu.Name))
		}
		names[bu.Name] = true
		switch bu.Scope {
		case ScopeTenant:
		case ScopeKey, ScopeAgent:
			if bu.Match == "" {
				errs = append(errs, fmt.Errorf("%s.match: missing: the %s the budget limits", field, bu.Scope))
			}
		default:
			errs = append(errs, fmt.Errorf("%s.scope: %q (want tenant, key or agent)", field, bu.Scope))
		}
		if bu.Period != PeriodDay && bu.Period != PeriodMonth {
			errs = append(errs, fmt.Errorf("%s.period: %q (want day or month)", field, bu.Period))
		}
		if bu.Tokens == nil && bu.USD == nil {
			errs = append(errs, fmt.Errorf("%s: a budget needs tokens, usd or both", field))
		}
		if (bu.Tokens != nil && *bu.Tokens < 0) || (bu.USD != nil && *bu.USD < 0) {
			errs = append(errs, fmt.Errorf("%s: a limit must not be negative", field))
		}
	}
	for ref, p := range f.Prices {
		if p.Input < 0 || p.Output < 0 || (p.CachedInput != nil && *p.CachedInput < 0) {
			errs = append(errs, fmt.Errorf("%s: prices.%s: a price must not be negative", path, ref))
		}
		if len(ref) < 3 || !bytes.ContainsRune([]byte(ref), '/') {
			errs = append(errs, fmt.Errorf("%s: prices.%s: want \"provider/model\" or \"provider/*\"", path, ref))
		}
	}
	return f, errors.Join(errs...)
}
