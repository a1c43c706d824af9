package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// utc is a UTC time for the tests.
func utc(y int, mo time.Month, d, h, mi int) time.Time {
	return time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
}

func mustParse(t *testing.T, expr, tz string) *Cron {
	t.Helper()
	c, err := Parse(expr, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, tz, err)
	}
	return c
}

// nexts returns the n firings after from.
func nexts(c *Cron, from time.Time, n int) []time.Time {
	var out []time.Time
	for range n {
		from = c.Next(from)
		out = append(out, from)
	}
	return out
}

func sameTimes(t *testing.T, what string, got, want []time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("%s: firing %d is %s, want %s (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

// TestCronShapes: every shape of a five-field expression and every
// descriptor fires when it says, from a fixed "now" (a Sunday).
func TestCronShapes(t *testing.T) {
	from := utc(2026, 3, 1, 12, 0) // Sunday 12:00 UTC
	cases := []struct {
		expr string
		want []time.Time
	}{
		{"* * * * *", []time.Time{utc(2026, 3, 1, 12, 1), utc(2026, 3, 1, 12, 2), utc(2026, 3, 1, 12, 3)}},
		{"*/15 * * * *", []time.Time{utc(2026, 3, 1, 12, 15), utc(2026, 3, 1, 12, 30), utc(2026, 3, 1, 12, 45)}},
		{"5,35 * * * *", []time.Time{utc(2026, 3, 1, 12, 5), utc(2026, 3, 1, 12, 35), utc(2026, 3, 1, 13, 5)}},
		{"0 9-11 * * *", []time.Time{utc(2026, 3, 2, 9, 0), utc(2026, 3, 2, 10, 0), utc(2026, 3, 2, 11, 0)}},
		{"0 9 * * 1-5", []time.Time{utc(2026, 3, 2, 9, 0), utc(2026, 3, 3, 9, 0), utc(2026, 3, 4, 9, 0)}},
		{"0 9 * * MON-FRI", []time.Time{utc(2026, 3, 2, 9, 0), utc(2026, 3, 3, 9, 0), utc(2026, 3, 4, 9, 0)}},
		{"0 0 1 * *", []time.Time{utc(2026, 4, 1, 0, 0), utc(2026, 5, 1, 0, 0), utc(2026, 6, 1, 0, 0)}},
		{"0 0 1 JAN,JUL *", []time.Time{utc(2026, 7, 1, 0, 0), utc(2027, 1, 1, 0, 0), utc(2027, 7, 1, 0, 0)}},
		{"30 6 15 * SUN", []time.Time{utc(2026, 3, 8, 6, 30), utc(2026, 3, 15, 6, 30), utc(2026, 3, 22, 6, 30)}}, // dom OR dow, as cron
		{"0 12 29 2 *", []time.Time{utc(2028, 2, 29, 12, 0), utc(2032, 2, 29, 12, 0), utc(2036, 2, 29, 12, 0)}},
		{"@hourly", []time.Time{utc(2026, 3, 1, 13, 0), utc(2026, 3, 1, 14, 0), utc(2026, 3, 1, 15, 0)}},
		{"@daily", []time.Time{utc(2026, 3, 2, 0, 0), utc(2026, 3, 3, 0, 0), utc(2026, 3, 4, 0, 0)}},
		{"@midnight", []time.Time{utc(2026, 3, 2, 0, 0), utc(2026, 3, 3, 0, 0), utc(2026, 3, 4, 0, 0)}},
		{"@weekly", []time.Time{utc(2026, 3, 8, 0, 0), utc(2026, 3, 15, 0, 0), utc(2026, 3, 22, 0, 0)}},
		{"@monthly", []time.Time{utc(2026, 4, 1, 0, 0), utc(2026, 5, 1, 0, 0), utc(2026, 6, 1, 0, 0)}},
		{"@yearly", []time.Time{utc(2027, 1, 1, 0, 0), utc(2028, 1, 1, 0, 0), utc(2029, 1, 1, 0, 0)}},
		{"@annually", []time.Time{utc(2027, 1, 1, 0, 0), utc(2028, 1, 1, 0, 0), utc(2029, 1, 1, 0, 0)}},
		{"@every 15m", []time.Time{utc(2026, 3, 1, 12, 15), utc(2026, 3, 1, 12, 30), utc(2026, 3, 1, 12, 45)}},
		{"@every 1h30m", []time.Time{utc(2026, 3, 1, 13, 30), utc(2026, 3, 1, 15, 0), utc(2026, 3, 1, 16, 30)}},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			sameTimes(t, tc.expr, nexts(mustParse(t, tc.expr, ""), from, 3), tc.want)
		})
	}
}

// TestFirst: a schedule defined at t first fires at t when t is a firing
// (cron), else at the next one; @every counts from t.
func TestFirst(t *testing.T) {
	c := mustParse(t, "0 9 * * *", "")
	if got := c.First(utc(2026, 3, 1, 9, 0)); !got.Equal(utc(2026, 3, 1, 9, 0)) {
		t.Fatalf("First at a firing: %s", got)
	}
	if got := c.First(utc(2026, 3, 1, 9, 0).Add(time.Millisecond)); !got.Equal(utc(2026, 3, 2, 9, 0)) {
		t.Fatalf("First just after a firing: %s", got)
	}
	e := mustParse(t, "@every 15m", "")
	if got := e.First(utc(2026, 3, 1, 9, 0).Add(300 * time.Millisecond)); !got.Equal(utc(2026, 3, 1, 9, 15)) {
		t.Fatalf("@every First: %s", got)
	}
}

// TestTimeZones: the expression is read on the zone's wall clock; a
// CRON_TZ prefix names the zone too.
func TestTimeZones(t *testing.T) {
	from := utc(2026, 1, 5, 0, 0) // winter: Paris is UTC+1, New York UTC-5, Tokyo UTC+9
	for _, tc := range []struct {
		expr, tz string
		want     time.Time
	}{
		{"0 9 * * 1-5", "Europe/Paris", utc(2026, 1, 5, 8, 0)},
		{"0 9 * * 1-5", "America/New_York", utc(2026, 1, 5, 14, 0)},
		{"0 9 * * 1-5", "Asia/Tokyo", utc(2026, 1, 6, 0, 0)},
		{"CRON_TZ=Asia/Tokyo 0 9 * * 1-5", "", utc(2026, 1, 6, 0, 0)},
		{"TZ=Europe/Paris 0 9 * * *", "Europe/Paris", utc(2026, 1, 5, 8, 0)},
		{"@daily", "Europe/Paris", utc(2026, 1, 5, 23, 0)},
		{"0 9 * * *", "", utc(2026, 1, 5, 9, 0)}, // UTC by default
	} {
		c := mustParse(t, tc.expr, tc.tz)
		if got := c.Next(from); !got.Equal(tc.want) {
			t.Errorf("%q in %q: next is %s, want %s", tc.expr, tc.tz, got, tc.want)
		}
	}
	// Summer time moves the UTC hour of the same wall-clock time.
	c := mustParse(t, "0 9 * * *", "Europe/Paris")
	if got := c.Next(utc(2026, 7, 1, 0, 0)); !got.Equal(utc(2026, 7, 1, 7, 0)) {
		t.Fatalf("Paris in summer: %s", got)
	}
}

// TestDST: on the day the clocks go forward a time that does not exist is
// skipped, and on the day they go back a time that happens twice fires
// twice (robfig/cron's behaviour); a time outside the change is unmoved.
func TestDST(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	local := func(mo time.Month, d, h, mi int) time.Time { return time.Date(2026, mo, d, h, mi, 0, 0, ny) }
	// 2026-03-08 02:00 EST → 03:00 EDT: 02:30 does not exist that day.
	c := mustParse(t, "30 2 * * *", "America/New_York")
	sameTimes(t, "spring forward, 02:30", nexts(c, local(3, 7, 12, 0), 2), []time.Time{
		time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), time.Date(2026, 3, 10, 6, 30, 0, 0, time.UTC)})
	// 01:30 exists both days, at another UTC offset.
	c = mustParse(t, "30 1 * * *", "America/New_York")
	sameTimes(t, "spring forward, 01:30", nexts(c, local(3, 7, 12, 0), 2), []time.Time{
		time.Date(2026, 3, 8, 6, 30, 0, 0, time.UTC), time.Date(2026, 3, 9, 5, 30, 0, 0, time.UTC)})
	// 2026-11-01 02:00 EDT → 01:00 EST: 01:30 happens twice.
	sameTimes(t, "fall back, 01:30", nexts(c, local(11, 1, 0, 0), 3), []time.Time{
		time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC),
		time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC)})
	// @every is a period, blind to the wall clock.
	e := mustParse(t, "@every 1h", "America/New_York")
	sameTimes(t, "@every across fall back", nexts(e, time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), 2), []time.Time{
		time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC)})
}

// TestLatest: the firing due at now is the latest at or before it of the
// series from the stored next firing: after downtime, the one firing to
// catch up, never a burst; however long the gap, it is found at once.
func TestLatest(t *testing.T) {
	c := mustParse(t, "0 9 * * *", "")
	next := utc(2026, 3, 1, 9, 0)
	if got := c.Latest(next, next.Add(-time.Second)); !got.IsZero() {
		t.Fatalf("not due yet: %s", got)
	}
	if got := c.Latest(next, next); !got.Equal(next) {
		t.Fatalf("due at next: %s", got)
	}
	// Down for three days and a bit: the firing of the fourth day only.
	if got := c.Latest(next, utc(2026, 3, 4, 10, 0)); !got.Equal(utc(2026, 3, 4, 9, 0)) {
		t.Fatalf("after downtime: %s", got)
	}
	// Down for three years: one firing, found without walking each day.
	start := time.Now()
	if got := c.Latest(next, utc(2029, 3, 4, 8, 0)); !got.Equal(utc(2029, 3, 3, 9, 0)) {
		t.Fatalf("after years: %s", got)
	}
	m := mustParse(t, "* * * * *", "")
	if got := m.Latest(next, utc(2031, 3, 4, 8, 0).Add(30*time.Second)); !got.Equal(utc(2031, 3, 4, 8, 0)) {
		t.Fatalf("minutely after years: %s", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Latest over long gaps took %s", d)
	}
	// @every keeps its series: next + k·period.
	e := mustParse(t, "@every 15m", "")
	if got := e.Latest(utc(2026, 3, 1, 9, 7), utc(2026, 3, 9, 10, 0)); !got.Equal(utc(2026, 3, 9, 9, 52)) {
		t.Fatalf("@every after downtime: %s", got)
	}
	// In a zone, across a change of offset.
	p := mustParse(t, "0 9 * * *", "Europe/Paris")
	if got := p.Latest(utc(2026, 3, 27, 8, 0), utc(2026, 3, 30, 12, 0)); !got.Equal(utc(2026, 3, 30, 7, 0)) {
		t.Fatalf("Paris across summer time: %s", got)
	}
}

// TestParseErrors: what cannot be used is refused with the field to fix.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ expr, tz, field, says string }{
		{"", "", "cron", "required"},
		{"0 9 * *", "", "cron", "five fields"},
		{"0 0 9 * * *", "", "cron", "five fields"}, // seconds are not standard cron
		{"61 * * * *", "", "cron", "61"},
		{"0 9 * * 1-5", "Mars/Olympus", "timezone", "Mars/Olympus"},
		{"0 9 * * 1-5", "Local", "timezone", "IANA"},
		{"CRON_TZ=Europe/Paris 0 9 * * *", "Asia/Tokyo", "timezone", "once"},
		{"@every 15", "", "cron", "@every"},
		{"@every 500ms", "", "cron", "@every"},
		{"@sometimes", "", "cron", "@sometimes"},
		{"0 0 30 2 *", "", "cron", "never"},
	} {
		_, err := Parse(tc.expr, tc.tz)
		var se *SpecError
		if !errors.As(err, &se) || se.Field != tc.field || !strings.Contains(se.Message, tc.says) {
			t.Errorf("Parse(%q, %q) = %v, want a %s error saying %q", tc.expr, tc.tz, err, tc.field, tc.says)
		}
	}
}
