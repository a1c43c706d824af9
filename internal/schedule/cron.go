// Package schedule runs agent turns on a schedule: cron expressions (five
// fields, or a descriptor such as @every 15m or @daily) read in an IANA time
// zone, each due firing claimed in the store so that of many replicas one
// runs it, once, as a normal durable turn.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parser reads standard five-field cron and descriptors (@every, @daily, …).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Cron is a parsed schedule: when its firings are due.
type Cron struct {
	sched cron.Schedule
	// every is the period of an @every schedule (0 for the others).
	every time.Duration
	loc   *time.Location
}

// SpecError is a cron expression or time zone that cannot be used; Field
// is "cron" or "timezone".
type SpecError struct {
	Field   string
	Message string
}

// Error names the field and says what is wrong with it.
func (e *SpecError) Error() string { return e.Field + ": " + e.Message }

// Parse reads a cron expression in the IANA time zone tz ("" is UTC). The
// expression is five fields (minute hour day-of-month month day-of-week) or
// a descriptor (@yearly, @monthly, @weekly, @daily, @hourly, @every 15m); a
// CRON_TZ= prefix names the zone when tz is empty. Daylight saving time is
// handled as robfig/cron does: a time that does not exist on the day the
// clocks go forward is skipped that day, and one that happens twice when
// they go back fires both times.
func Parse(expr, tz string) (*Cron, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, &SpecError{"cron", "cron is required: five fields (minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5') or a descriptor such as '@every 15m' or '@daily'"}
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		prefix, rest, _ := strings.Cut(expr, " ")
		_, zone, _ := strings.Cut(prefix, "=")
		if tz != "" && zone != tz {
			return nil, &SpecError{"timezone", fmt.Sprintf("the cron's %s names another zone than timezone %q: give the zone once", prefix, tz)}
		}
		tz, expr = zone, strings.TrimSpace(rest)
	}
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return nil, &SpecError{"timezone", fmt.Sprintf("unknown time zone %q: use an IANA name such as 'Europe/Paris' or 'America/New_York'", tz)}
		}
		loc = l
	}
	if strings.HasPrefix(expr, "@every ") {
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(expr, "@every ")))
		if err != nil || d < time.Second || d%time.Second != 0 {
			return nil, &SpecError{"cron", fmt.Sprintf("%q: @every takes a whole number of seconds of at least 1s, such as '@every 15m' or '@every 1h30m'", expr)}
		}
		return &Cron{sched: cron.Every(d), every: d, loc: loc}, nil
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, &SpecError{"cron", "the cron names its time zone twice"}
	}
	s, err := parser.Parse("CRON_TZ=" + loc.String() + " " + expr)
	if err != nil {
		return nil, &SpecError{"cron", fmt.Sprintf("%q: %v (five fields: minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5', or a descriptor such as '@every 15m' or '@daily')", expr, err)}
	}
	c := &Cron{sched: s, loc: loc}
	if c.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() && c.Next(time.Now()).IsZero() {
		return nil, &SpecError{"cron", fmt.Sprintf("%q never fires", expr)}
	}
	return c, nil
}

// Location is the zone the schedule is read in.
func (c *Cron) Location() *time.Location { return c.loc }

// Next is the first firing strictly after t (in UTC), or the zero time when
// there is none within five years.
func (c *Cron) Next(t time.Time) time.Time {
	n := c.sched.Next(t.In(c.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// First is the first firing at or after t: the NextAt of a schedule
// created, enabled or changed at t.
func (c *Cron) First(t time.Time) time.Time {
	if c.every > 0 {
		return t.UTC().Truncate(time.Second).Add(c.every)
	}
	return c.Next(t.Add(-time.Nanosecond).Truncate(time.Second).Add(time.Second - time.Nanosecond))
}

// Latest is the latest firing at or before now of the series that begins
// at next (a schedule's stored NextAt): next itself when no later firing is
// due, or the zero time when next is after now. The result depends only on
// next and the firings due, so replicas that read the same NextAt find the
// same firing.
func (c *Cron) Latest(next, now time.Time) time.Time {
	if next.IsZero() || next.After(now) {
		return time.Time{}
	}
	if c.every > 0 {
		// The series next, next+every, …: arithmetic, however long the gap.
		k := now.Sub(next) / c.every
		return next.Add(k * c.every).UTC()
	}
	// A cron's firings are on the wall clock, whatever the series began
	// at: search back from now in growing windows, so a long gap costs no
	// more than a short one.
	start := next
	for _, w := range []time.Duration{time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour} {
		if s := now.Add(-w); s.After(next) {
			if f := c.Next(s); !f.IsZero() && !f.After(now) {
				start = f
				break
			}
			continue
		}
		break
	}
	last := start
	for {
		f := c.Next(last)
		if f.IsZero() || f.After(now) {
			return last.UTC()
		}
		last = f
	}
}
