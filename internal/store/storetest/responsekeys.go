package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/store"
)

func responseKey(tenant, key, digest, thread string, created time.Time) store.ResponseKey {
	return store.ResponseKey{Tenant: tenant, Key: key, Digest: digest, ThreadID: thread, CreatedAt: created,
		ExpiresAt: created.Add(10 * time.Minute)}
}

func claim(t *testing.T, s store.Store, k store.ResponseKey, replace string) (*store.ResponseKey, bool) {
	t.Helper()
	got, won, err := s.ClaimResponseKey(t.Context(), k, replace)
	if err != nil {
		t.Fatalf("ClaimResponseKey %s/%s → %s (replace %q): %v", k.Tenant, k.Key, k.ThreadID, replace, err)
	}
	return got, won
}

func sameResponseKey(t *testing.T, what string, got *store.ResponseKey, want store.ResponseKey) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil entry", what)
	}
	sameTime(t, what+": created", got.CreatedAt, want.CreatedAt)
	sameTime(t, what+": expires", got.ExpiresAt, want.ExpiresAt)
	g, w := *got, want
	g.CreatedAt, g.ExpiresAt, w.CreatedAt, w.ExpiresAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if g != w {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, g, w)
	}
}

// testResponseKeysClaim: the first claim of a key wins; a later one gets
// the entry there, whatever it brought, unless it names that entry's thread
// to replace; keys are per tenant; invalid claims store nothing.
func testResponseKeysClaim(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := responseKey("a", "key:k1", "d1", "conv_1", T0)
	got, won := claim(t, s, first, "")
	if !won {
		t.Fatal("the first claim of a key lost")
	}
	sameResponseKey(t, "first claim", got, first)

	again := responseKey("a", "key:k1", "d2", "conv_2", at(time.Minute))
	got, won = claim(t, s, again, "")
	if won {
		t.Fatal("a second claim of the key won")
	}
	sameResponseKey(t, "second claim", got, first)
	got, won = claim(t, s, again, "conv_other")
	if won {
		t.Fatal("a claim replacing another thread than the entry's won")
	}
	sameResponseKey(t, "claim replacing another thread", got, first)

	// Replacing the entry's own thread takes the key over, once.
	got, won = claim(t, s, again, "conv_1")
	if !won {
		t.Fatal("a claim replacing the entry's thread lost")
	}
	sameResponseKey(t, "replacing claim", got, again)
	third := responseKey("a", "key:k1", "d3", "conv_3", at(2*time.Minute))
	if got, won = claim(t, s, third, "conv_1"); won {
		t.Fatal("a second claim replacing the old thread won")
	}
	sameResponseKey(t, "late replacing claim", got, again)

	// Keys are the tenant's own, and another key is another entry.
	mine := responseKey("b", "key:k1", "d9", "conv_b", T0)
	if _, err := s.GetResponseKey(ctx, "b", "key:k1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetResponseKey of another tenant's key: %v", err)
	}
	if got, won = claim(t, s, mine, ""); !won {
		t.Fatalf("b's claim of a's key lost to %+v", got)
	}
	if got, err := s.GetResponseKey(ctx, "a", "key:k1"); err != nil {
		t.Fatal(err)
	} else {
		sameResponseKey(t, "GetResponseKey", got, again)
	}
	if got, won = claim(t, s, responseKey("a", "req:d1", "d1", "conv_4", T0), ""); !won {
		t.Fatalf("another key of a lost to %+v", got)
	}

	for name, k := range map[string]store.ResponseKey{
		"no tenant":   responseKey("", "key:x", "d", "conv", T0),
		"no key":      responseKey("a", "", "d", "conv", T0),
		"no digest":   responseKey("a", "key:x", "", "conv", T0),
		"no thread":   responseKey("a", "key:x", "d", "", T0),
		"no expiry":   {Tenant: "a", Key: "key:x", Digest: "d", ThreadID: "conv", CreatedAt: T0},
		"NUL in key":  responseKey("a", "key:x\x00", "d", "conv", T0),
		"bad UTF-8":   responseKey("a", "key:x", "d", "conv\xff", T0),
		"NUL replace": responseKey("a", "key:y", "d", "conv", T0),
	} {
		replace := ""
		if name == "NUL replace" {
			replace = "conv\x00"
		}
		_, _, err := s.ClaimResponseKey(ctx, k, replace)
		wantErr(t, "ClaimResponseKey with "+name, err, store.ErrInvalid)
	}
	if got, won = claim(t, s, responseKey("a", "key:y", "d", "conv_y", T0), ""); !won {
		t.Fatalf("an invalid claim was stored: %+v", got)
	}
}

// testResponseKeysConcurrent: of racing claims of one key exactly one wins,
// and every claim returns the winner's entry; so do racing replacements of
// one thread.
func testResponseKeysConcurrent(t *testing.T, s store.Store) {
	check := func(what, replace string, base int) {
		t.Helper()
		got := make([]*store.ResponseKey, racers)
		won := make([]bool, racers)
		errs := race(racers, func(i int) error {
			var err error
			got[i], won[i], err = s.ClaimResponseKey(t.Context(), responseKey("a", "key:k", "d", threadName(base+i), T0), replace)
			return err
		})
		winner := -1
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: claim %d: %v", what, i, err)
			}
			if won[i] {
				if winner >= 0 {
					t.Fatalf("%s: claims %d and %d both won", what, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no claim won: %+v", what, got)
		}
		for i := range got {
			if got[i].ThreadID != threadName(base+winner) {
				t.Fatalf("%s: claim %d returned %s, the winner is %s", what, i, got[i].ThreadID, threadName(base+winner))
			}
		}
	}
	check("racing first claims", "", 0)
	th, _ := claim(t, s, responseKey("a", "key:k", "d", "conv_probe", T0), "")
	check("racing replacements", th.ThreadID, racers)
}

func threadName(i int) string { return "conv_" + string(rune('a'+i)) }

// testResponseKeysSweep: the entries expired at now are deleted, except
// those whose thread is still running or queued.
func testResponseKeysSweep(t *testing.T, s store.Store) {
	ctx := t.Context()
	begin(t, s, "a", "conv_run", "x", "r1", T0, userMsg("m1", "hi"))
	begin(t, s, "a", "conv_idle", "x", "r2", T0, userMsg("m2", "hi"))
	finish(t, s, "a", "conv_idle", "r2", store.Idle, at(time.Second))
	for _, k := range []store.ResponseKey{
		responseKey("a", "key:running", "d", "conv_run", T0),
		responseKey("a", "key:idle", "d", "conv_idle", T0),
		responseKey("a", "key:never", "d", "conv_never", T0), // the attempt never began its thread
		responseKey("b", "key:late", "d", "conv_b", at(5*time.Minute)),
	} {
		claim(t, s, k, "")
	}
	if n, err := s.SweepResponseKeys(ctx, at(9*time.Minute)); err != nil || n != 0 {
		t.Fatalf("SweepResponseKeys before any expiry: %d %v", n, err)
	}
	if n, err := s.SweepResponseKeys(ctx, at(10*time.Minute)); err != nil || n != 2 {
		t.Fatalf("SweepResponseKeys at the expiry: %d %v, want 2", n, err)
	}
	// What is left is found again: the running thread's entry and b's.
	for _, k := range []store.ResponseKey{
		responseKey("a", "key:running", "d", "conv_run", T0),
		responseKey("b", "key:late", "d", "conv_b", at(5*time.Minute)),
	} {
		got, won := claim(t, s, responseKey(k.Tenant, k.Key, "d", "conv_new", at(11*time.Minute)), "")
		if won {
			t.Fatalf("%s/%s was swept", k.Tenant, k.Key)
		}
		sameResponseKey(t, "kept "+k.Key, got, k)
	}
	if _, won := claim(t, s, responseKey("a", "key:idle", "d", "conv_new", at(11*time.Minute)), ""); !won {
		t.Fatal("the idle thread's expired entry was not swept")
	}
	finish(t, s, "a", "conv_run", "r1", store.Idle, at(12*time.Minute))
	if n, err := s.SweepResponseKeys(ctx, at(16*time.Minute)); err != nil || n != 2 {
		t.Fatalf("SweepResponseKeys once the thread ended: %d %v, want 2 (its entry and b's)", n, err)
	}
}
