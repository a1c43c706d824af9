package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackbone/stackbone/internal/model/script"
	"github.com/stackbone/stackbone/internal/stacktest"
	"github.com/stackbone/stackbone/internal/store"
)

// tail GETs a response's events after starting_after with a client that
// gives up after 10 s (the stack's keepalive is an hour away, so only the
// fix answers in time). It returns the response and a reader of its
// events' sequence numbers.
func tail(t *testing.T, env *stacktest.Env, id string, after int64) (*http.Response, func() []int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", env.URL+"/v1/responses/"+id+"?stream=true&starting_after="+strconv.FormatInt(after, 10), nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET …?stream=true&starting_after=%d: %v (no headers in time)", after, err)
	}
	t.Cleanup(func() { _ = res.Body.Close() })
	return res, func() []int64 {
		var seqs []int64
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e struct {
				Seq int64 `json:"sequence_number"`
			}
			_ = json.Unmarshal([]byte(line), &e)
			seqs = append(seqs, e.Seq)
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("the stream did not end: %v", err)
		}
		return seqs
	}
}

// TestResponsesStreamStartingAtTheEnd: GET ?stream=true&starting_after=N
// with N at or past a response's last event sends its headers at once and,
// once the response is finished, ends the stream (nothing after N); for a
// background response still running, headers come at once too and the
// stream ends when the response does. On SQLite and PostgreSQL.
func TestResponsesStreamStartingAtTheEnd(t *testing.T) {
	t.Parallel()
	drivers := map[string]func(t *testing.T) store.Store{
		"sqlite":   func(t *testing.T) store.Store { return nil },
		"postgres": func(t *testing.T) store.Store { return stacktest.Postgres(t, "resp_tail") },
	}
	for name, open := range drivers {
		t.Run(name, func(t *testing.T) {
			env := stacktest.New(t, stacktest.Options{Store: open(t), KeepAliveInterval: time.Hour})
			r := call(t, "POST", env.URL+"/v1/responses", `{"model":"assistant","input":"hello"}`)
			var done struct{ ID string }
			if err := json.Unmarshal(r.body, &done); err != nil || r.status != 200 {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			_, read := tail(t, env, done.ID, 0)
			all := read()
			if len(all) < 3 {
				t.Fatalf("the whole stream again: %v", all)
			}
			last := all[len(all)-1]
			for _, after := range []int64{last, last + 1000} {
				res, read := tail(t, env, done.ID, after)
				if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("starting_after=%d: %d %s", after, res.StatusCode, res.Header.Get("Content-Type"))
				}
				if got := read(); len(got) != 0 {
					t.Fatalf("starting_after=%d sent events %v", after, got)
				}
			}

			release := env.Upstream.HoldOnce(script.When{LastUser: "slow"})
			defer release()
			r = call(t, "POST", env.URL+"/v1/responses", `{"model":"assistant","input":"slow one","background":true}`)
			var bg struct{ ID string }
			if err := json.Unmarshal(r.body, &bg); err != nil || r.status != 200 {
				t.Fatalf("background: %d %s", r.status, r.body)
			}
			stacktest.WaitFor(t, "the model call to be held", func() bool { return env.Upstream.Count() == 2 })
			res, read := tail(t, env, bg.ID, 1<<40)
			if res.StatusCode != 200 {
				t.Fatalf("running response: %d", res.StatusCode)
			}
			release()
			if got := read(); len(got) != 0 {
				t.Fatalf("running response past its end sent events %v", got)
			}
		})
	}
}
