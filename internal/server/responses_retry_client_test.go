package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/store"
	"github.com/stackbone/stackbone/internal/testwait"
)

// loseFirstAttempts is a proxy in front of the server that loses the answer
// of each case's first POST (a request's x-test-case header names its
// case): it hands the request to the server, calls the case's ready (which
// returns once the server is where the case loses the answer; done is
// closed when the server's answer has ended), then closes the client's
// connection without a byte of the answer. Other requests pass through.
// posts reports how many POSTs a case sent.
func loseFirstAttempts(t *testing.T, backend string, ready map[string]func(done <-chan struct{})) (proxyURL string, posts func(name string) int) {
	t.Helper()
	target, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	pass := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("x-test-case")
		var lose func(<-chan struct{})
		if r.Method == http.MethodPost {
			mu.Lock()
			seen[name]++
			if seen[name] == 1 {
				lose = ready[name]
			}
			mu.Unlock()
		}
		if r.Method != http.MethodPost || lose == nil {
			pass.ServeHTTP(w, r)
			return
		}
		loseAnswer(w, r, backend, lose)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return seen[name]
	}
}

// soon reports whether cond holds within a few seconds (for goroutines that
// must not stop the test: they report with t.Errorf).
func soon(cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	return testwait.Poll(ctx, cond)
}

// TestResponsesOpenAINodeSDKRetryChargesOnce runs
// tests/clients/responses-retry.mjs: the openai SDK (7.x) with its own
// retries sends requests that name no conversation and charge a card,
// through a proxy that loses each request's first answer. Without a key
// (JSON, streamed, background) the answer is lost while the charge runs and
// the SDK's retry attaches to it; with an Idempotency-Key in the request's
// headers (which the SDK sends again on its retry) it is lost after the turn
// ended and the retry gets the stored response. Every case gets its
// response, completed, the SDK sent two POSTs, and each card was charged
// once: one conversation, one user message and two model calls per case.
func TestResponsesOpenAINodeSDKRetryChargesOnce(t *testing.T) {
	t.Parallel()
	node, dir := nodeFixture(t, "clients", filepath.Join("openai", "package.json"))
	b := newBilling(t, nil, true)
	started := func() bool {
		select {
		case <-b.started:
			return true
		case <-time.After(20 * time.Second):
			t.Errorf("timed out waiting for a charge to begin")
			return false
		}
	}
	release := func() {
		select {
		case b.gate <- struct{}{}:
		case <-b.free:
		case <-time.After(20 * time.Second):
			t.Errorf("timed out releasing a charge")
		}
	}
	ended := func() bool {
		return soon(func() bool {
			ths, err := b.Store.ListThreads(context.Background(), "dev", store.ThreadFilter{Limit: 100})
			if err != nil {
				return false
			}
			for _, th := range ths {
				if th.Status == store.Running || th.Status == store.Queued {
					return false
				}
			}
			return true
		})
	}
	// Lost while the charge runs: the retry must attach, then the charge
	// may end.
	whileRunning := func(<-chan struct{}) {
		if !started() {
			return
		}
		attached := b.attaches()
		go func() {
			if !soon(func() bool { return b.attaches() > attached }) {
				t.Errorf("the SDK's retry did not attach to the running attempt")
				b.freeAll() // the retry runs a charge of its own: let both end
			}
			release()
		}()
	}
	// Lost once the turn ended.
	afterEnd := func(done <-chan struct{}) {
		if started() {
			release()
		}
		<-done
		if !ended() {
			t.Errorf("the first attempt did not end")
		}
	}
	ready := map[string]func(<-chan struct{}){
		"json": whileRunning, "stream": whileRunning, "background": whileRunning,
		"json-key": afterEnd, "stream-key": afterEnd, "background-key": afterEnd,
	}
	proxy, posts := loseFirstAttempts(t, b.URL, ready)

	var out struct {
		Results []struct {
			Name, ID, Status, Text, Error string
			OK                            bool
		} `json:"results"`
	}
	runErr := runNodeScript(t, node, dir, "responses-retry.mjs", &out, proxy, "billing")
	if len(out.Results) != len(ready) {
		t.Fatalf("want %d cases, got %+v (%v)", len(ready), out.Results, runErr)
	}
	b.waitIdle(t)
	first := map[string]bool{} // each conversation's first response
	ths, err := b.Store.ListThreads(context.Background(), "dev", store.ThreadFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range ths {
		if r, err := b.Store.NextResponse(context.Background(), "dev", th.ID, 0); err == nil {
			first[r.ID] = true
		}
	}
	for _, r := range out.Results {
		if !r.OK || r.Text != `Charged: {"charged":5}` || !first[r.ID] {
			t.Errorf("%s: %+v", r.Name, r)
		}
		if n := posts(r.Name); n != 2 {
			t.Errorf("%s: the SDK sent %d POSTs, want 2 (the lost one and its retry)", r.Name, n)
		}
	}
	n := len(ready)
	if got, want := b.tally(t), (tally{threads: n, users: n, charges: n, models: 2 * n}); got != want {
		t.Errorf("%+v, want %+v (one charge per case)", got, want)
	}
	if runErr != nil && !t.Failed() {
		t.Fatal(runErr)
	}
}
