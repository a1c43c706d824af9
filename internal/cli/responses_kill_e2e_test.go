package cli_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// TestBackgroundResponseSurvivesKill: a background response is streamed by
// a client (GET …?stream=true) until the server is killed (SIGKILL) in the
// middle of the turn; the restarted server finishes the run, and the client
// reads the rest with starting_after = the last sequence number it saw. The
// two parts make the whole response, each event once, and the tool ran
// once. On SQLite and on PostgreSQL.
func TestBackgroundResponseSurvivesKill(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T, dir string) string{
		"sqlite":   func(t *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "bg.db") },
		"postgres": func(t *testing.T, _ string) string { return postgresURL(t) },
	}
	for name, dbOf := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newStalledShop(t, `[
			 {"when":{"lastTool":"lookup"},"reply":{"text":"Found it: order o1 ships today."}},
			 {"when":{"lastUser":"find"},"reply":{"text":"Looking it up.","toolCalls":[{"name":"lookup","arguments":{"orderId":"o1"}}]}},
			 {"reply":{"text":"echo: {{lastUser}}"}}
			]`, "")
			lookups, mock, release, env := f.lookups, f.mock, f.release, f.env
			args := []string{"dev", "--dir", f.dir, "--addr", "127.0.0.1:0", "--db", dbOf(t, f.dir)}

			a := startServer(t, env, args...)
			ca := openai.NewClient(option.WithBaseURL(a.URL()+"/v1"), option.WithAPIKey("sk-local"), option.WithMaxRetries(0))
			res, err := ca.Responses.New(context.Background(), responses.ResponseNewParams{Model: "shop", Background: openai.Bool(true),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("find order o1")}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != responses.ResponseStatusInProgress && res.Status != responses.ResponseStatusQueued || !res.Background {
				t.Fatalf("background response %s", res.RawJSON())
			}

			// The client follows the stream until the process dies.
			type seen struct {
				seq  int64
				typ  string
				text string
			}
			var (
				mu     sync.Mutex
				events []seen
			)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			firstDone := make(chan struct{})
			go func() {
				defer close(firstDone)
				s := ca.Responses.GetStreaming(ctx, res.ID, responses.ResponseGetParams{})
				for s.Next() {
					ev := s.Current()
					mu.Lock()
					events = append(events, seen{ev.SequenceNumber, ev.Type, ev.Delta + ev.Text})
					mu.Unlock()
				}
			}()
			waitUntil(t, "the tool to run and the model call to stall", 10*time.Second, func() bool {
				return lookups.Load() == 1 && mock.Count() == 2
			})
			waitUntil(t, "the stream to deliver the first step's text", 10*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, e := range events {
					if e.typ == "response.output_item.done" {
						return true
					}
				}
				return false
			})
			a.Kill(t)
			<-firstDone
			release()
			if len(events) == 0 {
				t.Fatal("the stream from the first process delivered nothing")
			}
			n := events[len(events)-1].seq

			b := startServer(t, env, args...)
			cb := openai.NewClient(option.WithBaseURL(b.URL()+"/v1"), option.WithAPIKey("sk-local"), option.WithMaxRetries(0))
			s := cb.Responses.GetStreaming(ctx, res.ID, responses.ResponseGetParams{StartingAfter: openai.Int(n)})
			for s.Next() {
				ev := s.Current()
				if ev.SequenceNumber <= n {
					t.Fatalf("resumed stream sent %d (%s), at or before starting_after %d", ev.SequenceNumber, ev.Type, n)
				}
				events = append(events, seen{ev.SequenceNumber, ev.Type, ev.Delta + ev.Text})
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}

			var types []string
			var deltas strings.Builder
			last := int64(-1)
			for _, e := range events {
				if e.seq <= last {
					t.Fatalf("sequence %d after %d", e.seq, last)
				}
				last = e.seq
				types = append(types, e.typ)
				if e.typ == "response.output_text.delta" {
					deltas.WriteString(e.text)
				}
			}
			if deltas.String() != "Looking it up.Found it: order o1 ships today." {
				t.Fatalf("text across both processes %q (events %v)", deltas.String(), types)
			}
			if types[0] != "response.created" || types[len(types)-1] != "response.completed" ||
				strings.Count(strings.Join(types, " "), "response.output_item.added") != 2 {
				t.Fatalf("events across both processes %v", types)
			}
			got, err := cb.Responses.Get(context.Background(), res.ID, responses.ResponseGetParams{})
			if err != nil || got.Status != responses.ResponseStatusCompleted || got.OutputText() != "Looking it up.Found it: order o1 ships today." {
				t.Fatalf("the finished response: %v %s", err, got.RawJSON())
			}
			if lookups.Load() != 1 {
				t.Fatalf("the tool ran %d times", lookups.Load())
			}
		})
	}
}
