package studio_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// TestSchedulesPage: Studio's Schedules page lists the tenant's schedules
// with their next run, and after Run now the last run and its outcome,
// linked to the run's thread.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	env := stacktest.New(t, stacktest.Options{})
	resp, err := http.Post(env.URL+"/v1/schedules", "application/json", strings.NewReader(
		`{"name":"nightly","agent":"assistant","cron":"0 2 * * *","timezone":"Europe/Paris","input":"hello from the night","thread":"nightly"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sc store.Schedule
	if resp.StatusCode != 201 || json.Unmarshal(b, &sc) != nil {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	p := newPage(t)
	p.open(env.URL + "/studio/#/schedules")
	row := `tr[data-schedule="` + sc.ID + `"]`
	p.waitText(row+" th", "nightly")
	p.waitText(row+" td code", "0 2 * * * (Europe/Paris)")
	p.waitText(row+" .last", "never")
	p.waitJS("the next run", `document.querySelector('`+row+` .next time') !== null`)
	if next := eval[string](p, `document.querySelector('`+row+` .next time').textContent`); !strings.HasPrefix(next, "in ") {
		t.Fatalf("the next run reads %q; want how soon it is (\"in …\")", next)
	}
	p.click(row + ` button[data-run]`)
	p.waitText(`tr[data-status="completed"] .outcome a`, "completed")
	if href := eval[string](p, `document.querySelector('`+row+` .outcome a').getAttribute('href')`); !strings.Contains(href, "nightly") {
		t.Fatalf("the outcome links to %q, not the run's thread", href)
	}
}
