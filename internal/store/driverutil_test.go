package store

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stackbone/stackbone/internal/event"
)

func TestLoadMigrations(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0010_later.sql": {Data: []byte("B")},
		"m/0002_first.sql": {Data: []byte("A")},
		"m/README.md":      {Data: []byte("not a migration")},
	}
	ms, err := LoadMigrations(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []Migration{{2, "0002_first.sql", "A"}, {10, "0010_later.sql", "B"}}
	if len(ms) != len(want) || ms[0] != want[0] || ms[1] != want[1] {
		t.Fatalf("LoadMigrations = %+v, want %+v", ms, want)
	}

	for name, bad := range map[string]fstest.MapFS{
		"no number":      {"m/init.sql": {}},
		"zero":           {"m/0000_init.sql": {}},
		"shared version": {"m/0001_a.sql": {}, "m/01_b.sql": {}},
		"none":           {},
	} {
		if _, err := LoadMigrations(bad, "m"); err == nil {
			t.Errorf("%s: LoadMigrations succeeded", name)
		}
	}
}

func TestPendingMigrations(t *testing.T) {
	ms := []Migration{{Version: 1}, {Version: 2}, {Version: 3}}
	p, err := PendingMigrations(ms, []int{1})
	if err != nil || len(p) != 2 || p[0].Version != 2 || p[1].Version != 3 {
		t.Fatalf("PendingMigrations(1) = %+v, %v", p, err)
	}
	if p, err := PendingMigrations(ms, []int{1, 2, 3}); err != nil || len(p) != 0 {
		t.Fatalf("PendingMigrations(1,2,3) = %+v, %v", p, err)
	}
	// A database that applied 3 before 2 landed (two branches merged) still
	// gets 2: a missing version below the newest is not skipped.
	if p, err := PendingMigrations(ms, []int{1, 3}); err != nil || len(p) != 1 || p[0].Version != 2 {
		t.Fatalf("PendingMigrations(1,3) = %+v, %v, want [2]", p, err)
	}
	if _, err := PendingMigrations(ms, []int{1, 2, 3, 4}); err == nil || !strings.Contains(err.Error(), "newer than this build's 3") {
		t.Fatalf("PendingMigrations(4): %v, want a newer-schema error", err)
	}
}

func TestEncodeEventsThenStamp(t *testing.T) {
	evs := []event.Event{{Type: event.RunStarted, Seq: 9}, {Type: event.RunFinished, ThreadID: "other", RunID: "r0"}}
	enc, err := EncodeEvents(evs, "t", "r")
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Seq != 9 || evs[0].ThreadID != "" {
		t.Fatalf("EncodeEvents changed the caller's events: %+v", evs[0])
	}
	for i, want := range []string{`"threadId":"t"`, `"threadId":"other"`} {
		if !strings.Contains(enc[i], want) || strings.Contains(enc[i], `"seq":9`) {
			t.Errorf("event %d stored as %s, want %s and no seq", i, enc[i], want)
		}
	}
	StampEvents(evs, "t", "r", 12)
	if evs[0].Seq != 11 || evs[1].Seq != 12 || evs[0].ThreadID != "t" || evs[0].RunID != "r" || evs[1].RunID != "r0" {
		t.Fatalf("StampEvents: %+v", evs)
	}
}
