// Command load measures Stackbone the way shared/reference/perf.md measured
// its peers: a scripted OpenAI-compatible model server, one Go load
// generator, non-stream turns, a new durable thread per turn.
//
// It starts the mock upstream in-process (modeltest, on a loopback port),
// writes a temporary project with one TypeScript agent (model
// "openai/bench", a server tool get_weather), builds and starts the real
// binary (`stackbone dev --dir TMP --addr 127.0.0.1:0`) pointed at the mock,
// runs the chosen scenarios and prints a Markdown table:
//
//	floor-a  the text request Stackbone sends, posted straight to the mock
//	floor-b  the two requests of a tool turn, straight to the mock
//	floor-c  floor-b at the given concurrency for the given duration
//	a        durable text turn ("hello" → "echo: hello"), concurrency 1
//	b        durable 2-step tool turn ("weather Paris" → get_weather →
//	         "Tool said: …"), concurrency 1
//	c        b at the given concurrency for the given duration
//	d        stateless text turn (no session), concurrency 1
//
// Server CPU per turn is the server process's utime+stime (/proc/PID/stat)
// over the measured turns; RSS is VmRSS (/proc/PID/status) before any
// request and after scenario c. Everything runs on loopback, every loop is
// bounded by a turn count or a duration, and the program stops by itself.
//
// Run it from the module root:
//
//	go run ./bench/load
//	go run ./bench/load -scenarios floor,b,c -turns 500 -duration 5s
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stackbone/stackbone/bench/internal/benchproc"
	"github.com/stackbone/stackbone/internal/model/modeltest"
	"github.com/stackbone/stackbone/internal/model/script"
)

// benchScript is the perf.md model: a get_weather call for "weather …",
// "Tool said: …" after the tool result, "echo: <text>" otherwise.
const benchScript = `[
 {"when": {"lastTool": "get_weather"}, "reply": {"text": "Tool said: {{lastTool}}"}},
 {"when": {"lastUser": "weather"}, "reply": {"toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
 {"reply": {"text": "echo: {{lastUser}}"}}
]`

// agentTS is the one agent of the benchmark project.
const agentTS = `import { defineDeepAgent, tool } from 'stackbone';

export default defineDeepAgent({
  name: 'bench',
  model: 'openai/bench',
  instructions: 'You are a concise assistant. Use tools when they help.',
  tools: {
    get_weather: tool({
      description: 'Current weather for a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      async execute({ city }: { city: string }) {
        return { city, temp_c: 21, sky: 'sunny' };
      },
    }),
  },
});
`

// Turn texts and the reply fragments that prove a turn did its work.
const (
	textTurn   = "hello"
	toolTurn   = "weather Paris"
	textAnswer = "echo: hello"
	toolAnswer = "Tool said:"
)

// scenarioKeys names the scenarios, in the order they run.
var scenarioKeys = []string{"floor-a", "floor-b", "floor-c", "a", "b", "c", "d", "e", "idle"}

// options are the command-line settings.
type options struct {
	scenarios   []string
	turns       int
	warmup      int
	duration    time.Duration
	concurrency int
	bin         string
	idle        int
	db          string
	// serverEnv are NAME=value settings for the server (the harness
	// passes it no STACKBONE_ variable of its own environment).
	serverEnv []string
}

func main() {
	var o options
	var sc string
	flag.StringVar(&sc, "scenarios", "floor,a,b,c,d,e", "comma list of floor-a, floor-b, floor-c, a, b, c, d, e, idle (floor = the three floors)")
	flag.IntVar(&o.turns, "turns", 2000, "measured turns per concurrency-1 scenario")
	flag.IntVar(&o.warmup, "warmup", 100, "unmeasured turns before each scenario")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of the concurrent scenarios (c, floor-c)")
	flag.IntVar(&o.concurrency, "concurrency", 16, "clients in the concurrent scenarios")
	flag.IntVar(&o.idle, "idle", 10000, "idle SSE streams the idle scenario opens")
	var serverEnv string
	flag.StringVar(&serverEnv, "server-env", "", "comma list of NAME=value settings for the server, e.g. STACKBONE_TRACE_CONTENT=false")
	flag.StringVar(&o.db, "db", "", "the server's store (STACKBONE_DB; default SQLite in the temp project), e.g. postgres://…")
	flag.StringVar(&o.bin, "bin", "", "a built stackbone binary (default: go build ./cmd/stackbone into a temp dir)")
	flag.Parse()
	if serverEnv != "" {
		o.serverEnv = strings.Split(serverEnv, ",")
	}
	for k := range strings.SplitSeq(sc, ",") {
		if k = strings.TrimSpace(k); k == "floor" {
			o.scenarios = append(o.scenarios, "floor-a", "floor-b", "floor-c")
		} else {
			o.scenarios = append(o.scenarios, k)
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	for _, k := range o.scenarios {
		if !slices.Contains(scenarioKeys, k) {
			logger.Error("unknown scenario (want floor or one of "+strings.Join(scenarioKeys, ", ")+")", "scenario", k)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, os.Stdout, logger)
	stop()
	if err != nil {
		logger.Error("load", "err", err)
		os.Exit(1)
	}
}

// run sets up the mock and the server, runs the scenarios and writes the
// report to out.
func run(ctx context.Context, o options, out io.Writer, logger *slog.Logger) error {
	tmp, err := os.MkdirTemp("", "stackbone-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	up, err := startUpstream()
	if err != nil {
		return err
	}
	defer up.close()

	if err := os.MkdirAll(filepath.Join(tmp, "agents"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "agents", "bench.ts"), []byte(agentTS), 0o644); err != nil {
		return err
	}
	bin := o.bin
	if bin == "" {
		if bin, err = benchproc.Build(ctx, tmp, logger); err != nil {
			return err
		}
	}
	if slices.Contains(o.scenarios, "idle") {
		raiseFileLimit(uint64(o.idle) + 4096)
	}
	srv, err := benchproc.Start(ctx, bin, []string{"dev", "--dir", tmp, "--addr", "127.0.0.1:0"},
		append(append([]string{"OPENAI_BASE_URL=" + up.url + "/v1", "OPENAI_API_KEY=sk-bench", "STACKBONE_MAX_CONNS_PER_IP=0"}, dbEnv(o.db)...), o.serverEnv...), logger)
	if err != nil {
		return err
	}
	defer srv.Stop()

	rep := report{opts: o}
	if rep.rssIdle, err = benchproc.RSS(srv.PID()); err != nil {
		return err
	}
	c := &client{http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4 * o.concurrency}}}
	// One probe turn of each kind checks the setup and records the exact
	// upstream requests Stackbone makes, which the floors replay.
	mock := up.reset()
	if err := c.chat(ctx, srv.URL, "probe-text", textTurn, textAnswer); err != nil {
		return err
	}
	if err := c.chat(ctx, srv.URL, "probe-tool", toolTurn, toolAnswer); err != nil {
		return err
	}
	if err := c.stored(ctx, srv.URL, "probe-tool", toolAnswer); err != nil {
		return err
	}
	reqs := mock.Requests()
	if len(reqs) != 3 {
		return fmt.Errorf("probe turns made %d upstream calls, want 3 (1 text + 2 tool)", len(reqs))
	}
	floorText, floorTool := [][]byte{reqs[0].Body}, [][]byte{reqs[1].Body, reqs[2].Body}
	rep.upstreamStream = reqs[0].Stream

	var seq atomic.Int64
	durable := func(text, want string) func(context.Context) error {
		return func(ctx context.Context) error {
			return c.chat(ctx, srv.URL, fmt.Sprintf("bench-%d", seq.Add(1)), text, want)
		}
	}
	floor := func(bodies [][]byte) func(context.Context) error {
		return func(ctx context.Context) error { return c.replay(ctx, up.url+"/v1/chat/completions", bodies) }
	}
	all := []*scenario{
		{key: "floor-a", name: "floor (a): text request straight to the mock", conc: 1, turns: o.turns, calls: 1, turn: floor(floorText)},
		{key: "floor-b", name: "floor (b): tool turn's 2 requests straight to the mock", conc: 1, turns: o.turns, calls: 2, turn: floor(floorTool)},
		{key: "floor-c", name: fmt.Sprintf("floor (c): floor (b) at concurrency %d", o.concurrency), conc: o.concurrency, dur: o.duration, calls: 2, turn: floor(floorTool)},
		{key: "a", name: "(a) durable text turn", conc: 1, turns: o.turns, calls: 1, server: true, turn: durable(textTurn, textAnswer)},
		{key: "b", name: "(b) durable 2-step tool turn", conc: 1, turns: o.turns, calls: 2, server: true, turn: durable(toolTurn, toolAnswer)},
		{key: "c", name: fmt.Sprintf("(c) durable tool turn at concurrency %d", o.concurrency), conc: o.concurrency, dur: o.duration, calls: 2, server: true, turn: durable(toolTurn, toolAnswer)},
		{key: "d", name: "(d) stateless text turn", conc: 1, turns: o.turns, calls: 1, server: true, turn: func(ctx context.Context) error {
			return c.chat(ctx, srv.URL, "", textTurn, textAnswer)
		}},
		// Each text differs: a repeated stateless request is a client's
		// retry, answered from the retry journal without running the tool.
		{key: "e", name: "(e) stateless 2-step tool turn", conc: 1, turns: o.turns, calls: 2, server: true, turn: func(ctx context.Context) error {
			return c.chat(ctx, srv.URL, "", fmt.Sprintf("%s %d", toolTurn, seq.Add(1)), toolAnswer)
		}},
	}
	for _, sc := range all {
		if !slices.Contains(o.scenarios, sc.key) {
			continue
		}
		logger.Info("scenario", "key", sc.key, "name", sc.name)
		r, err := sc.measure(ctx, o.warmup, srv.PID(), up)
		if err != nil {
			return fmt.Errorf("scenario %s: %w\nserver log tail:\n%s", sc.key, err, srv.LogTail())
		}
		rep.results = append(rep.results, r)
		if sc.key == "c" {
			if rep.rssAfterC, err = benchproc.RSS(srv.PID()); err != nil {
				return err
			}
		}
	}
	rep.write(out)
	if slices.Contains(o.scenarios, "idle") {
		logger.Info("scenario", "key", "idle", "streams", o.idle)
		r, err := idleStreams(ctx, srv.URL, "probe-tool", srv.PID(), o.idle)
		if err != nil {
			return fmt.Errorf("scenario idle: %w\nserver log tail:\n%s", err, srv.LogTail())
		}
		r.write(out)
	}
	return nil
}

// upstream is the scripted mock on a loopback port. The Mock records every
// request, so a fresh one replaces it every recycle requests to keep the
// harness's memory bounded; calls counts every request served.
type upstream struct {
	url   string
	srv   *http.Server
	cur   atomic.Pointer[modeltest.Mock]
	calls atomic.Int64
}

// recycle is how many requests one Mock records before it is replaced.
const recycle = 4096

func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{url: "http://" + ln.Addr().String()}
	u.reset()
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

// ServeHTTP counts the request and lets the current Mock answer it.
func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u.calls.Add(1)%recycle == 0 {
		u.reset()
	}
	u.cur.Load().ServeHTTP(w, r)
}

// reset installs and returns a fresh mock answering from benchScript.
func (u *upstream) reset() *modeltest.Mock {
	m := modeltest.Handler(modeltest.OpenAI, script.MustParse(benchScript))
	u.cur.Store(m)
	return m
}

func (u *upstream) close() { _ = u.srv.Close() }

// client posts turns and checks their answers.
type client struct{ http *http.Client }

// chat posts one non-stream chat turn to Stackbone (in thread session, or
// stateless when session is empty) and checks the reply contains want.
func (c *client) chat(ctx context.Context, base, session, text, want string) error {
	body := `{"model":"bench","messages":[{"role":"user","content":"` + text + `"}]}`
	hdr := http.Header{"Content-Type": {"application/json"}}
	if session != "" {
		hdr.Set("x-stackbone-session", session)
	}
	got, err := c.post(ctx, base+"/v1/chat/completions", hdr, []byte(body))
	if err == nil && !bytes.Contains(got, []byte(want)) {
		err = fmt.Errorf("reply lacks %q: %s", want, got)
	}
	return err
}

// stored checks thread session is stored and holds want.
func (c *client) stored(ctx context.Context, base, session, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/threads/"+session, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(want))) {
		err = fmt.Errorf("thread %s: status %d, want it stored with %q: %s", session, resp.StatusCode, want, got)
	}
	return err
}

// replay posts recorded upstream request bodies, in order, to the mock.
func (c *client) replay(ctx context.Context, url string, bodies [][]byte) error {
	hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-bench"}}
	for _, b := range bodies {
		if _, err := c.post(ctx, url, hdr, b); err != nil {
			return err
		}
	}
	return nil
}

// post sends one request and reads the whole answer; non-200 is an error.
func (c *client) post(ctx context.Context, url string, hdr http.Header, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = hdr
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: status %d: %s", url, resp.StatusCode, got)
	}
	return got, err
}

// scenario is one measured workload: a number of turns (turns > 0) or a
// duration (dur > 0), from conc clients.
type scenario struct {
	key, name string
	conc      int
	turns     int
	dur       time.Duration
	// calls is the number of upstream calls one turn makes (checked).
	calls int
	// server marks scenarios that go through Stackbone (CPU is reported).
	server bool
	turn   func(context.Context) error
}

// result is what one scenario measured.
type result struct {
	sc      *scenario
	lat     []time.Duration // sorted
	elapsed time.Duration
	cpu     time.Duration // server CPU over the measured turns
}

// measure runs warmup unmeasured turns, then the measured ones, and checks
// the mock saw exactly the expected upstream calls.
func (sc *scenario) measure(ctx context.Context, warmup, pid int, up *upstream) (result, error) {
	calls0 := up.calls.Load()
	if _, err := sc.drive(ctx, warmup, 0); err != nil {
		return result{}, fmt.Errorf("warm-up: %w", err)
	}
	cpu0, err := benchproc.CPUTime(pid)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	lat, err := sc.drive(ctx, sc.turns, sc.dur)
	elapsed := time.Since(start)
	if err != nil {
		return result{}, err
	}
	cpu1, err := benchproc.CPUTime(pid)
	if err != nil {
		return result{}, err
	}
	if got, want := up.calls.Load()-calls0, int64((warmup+len(lat))*sc.calls); got != want {
		return result{}, fmt.Errorf("upstream saw %d calls, want %d", got, want)
	}
	slices.Sort(lat)
	return result{sc: sc, lat: lat, elapsed: elapsed, cpu: cpu1 - cpu0}, nil
}

// drive runs turns from sc.conc clients until n turns are done (n > 0) or
// dur has passed, and returns every turn's latency. The first error stops
// all clients.
func (sc *scenario) drive(ctx context.Context, n int, dur time.Duration) ([]time.Duration, error) {
	if n <= 0 && dur <= 0 {
		return nil, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := time.Now().Add(dur)
	var (
		next atomic.Int64
		mu   sync.Mutex
		all  []time.Duration
		wg   sync.WaitGroup
	)
	for range sc.conc {
		wg.Go(func() {
			var lat []time.Duration
			for ctx.Err() == nil {
				if n > 0 && next.Add(1) > int64(n) || n <= 0 && !time.Now().Before(deadline) {
					break
				}
				t0 := time.Now()
				if err := sc.turn(ctx); err != nil {
					cancel(err)
					break
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return all, nil
}

// pct returns the q-quantile (nearest rank) of sorted latencies.
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := max(int(math.Ceil(q*float64(len(sorted))))-1, 0)
	return sorted[i]
}

// report collects the results and writes them as Markdown.
type report struct {
	opts               options
	results            []result
	rssIdle, rssAfterC int64 // bytes; 0 when not measured
	// upstreamStream is whether Stackbone's upstream requests (which the
	// floors replay) ask for a streamed answer.
	upstreamStream bool
}

func (r *report) get(key string) *result {
	for i := range r.results {
		if r.results[i].sc.key == key {
			return &r.results[i]
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }

// write prints the perf.md-shaped summary, then one row per scenario.
func (r *report) write(w io.Writer) {
	p50p99 := func(key string) string {
		if x := r.get(key); x != nil {
			return ms(pct(x.lat, .5)) + " / " + ms(pct(x.lat, .99))
		}
		return "—"
	}
	rate := func(key string) (string, string) {
		if x := r.get(key); x != nil {
			return fmt.Sprintf("%.0f", float64(len(x.lat))/x.elapsed.Seconds()), ms(pct(x.lat, .99))
		}
		return "—", "—"
	}
	mib := func(b int64) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f", float64(b)/(1<<20))
	}
	cpuB := "—"
	if x := r.get("b"); x != nil {
		cpuB = fmt.Sprintf("%.3f", float64(x.cpu)/1e6/float64(len(x.lat)))
	}
	fmt.Fprintf(w, "Stackbone load harness (bench/load): %d turns at concurrency 1, concurrency %d for %s, %d warm-up turns per scenario, %d CPUs.\n\n",
		r.opts.turns, r.opts.concurrency, r.opts.duration, r.opts.warmup, runtime.NumCPU())
	fmt.Fprintln(w, "| target | (a) p50 / p99 ms | (b) p50 / p99 ms | (c) turns/s | (c) p99 ms | server CPU ms per turn (b) | RSS idle → after (c) MiB |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	fr, fp := rate("floor-c")
	fmt.Fprintf(w, "| the model server alone (floor) | %s | %s | %s | %s | — | — |\n", p50p99("floor-a"), p50p99("floor-b"), fr, fp)
	sr, sp := rate("c")
	fmt.Fprintf(w, "| Stackbone (dev, SQLite) | %s | %s | %s | %s | %s | %s → %s |\n\n", p50p99("a"), p50p99("b"), sr, sp, cpuB, mib(r.rssIdle), mib(r.rssAfterC))

	fmt.Fprintln(w, "| scenario | clients | turns | turns/s | p50 ms | p99 ms | p99 added over floor ms | server CPU ms per turn |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	floorOf := map[string]string{"a": "floor-a", "b": "floor-b", "c": "floor-c", "d": "floor-a", "e": "floor-b"}
	for _, x := range r.results {
		added, cpu := "—", "—"
		if f := r.get(floorOf[x.sc.key]); f != nil {
			added = ms(pct(x.lat, .99) - pct(f.lat, .99))
		}
		if x.sc.server {
			cpu = fmt.Sprintf("%.3f", float64(x.cpu)/1e6/float64(len(x.lat)))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.0f | %s | %s | %s | %s |\n", x.sc.name, x.sc.conc, len(x.lat),
			float64(len(x.lat))/x.elapsed.Seconds(), ms(pct(x.lat, .5)), ms(pct(x.lat, .99)), added, cpu)
	}
	fmt.Fprintf(w, "\nServer RSS: idle %s MiB, after (c) %s MiB. Server CPU from /proc/PID/stat (10 ms ticks).\n", mib(r.rssIdle), mib(r.rssAfterC))
	fmt.Fprintf(w, "Floors replay the exact upstream requests Stackbone made (stream=%t); a floor (b) turn is its two requests in a row.\n", r.upstreamStream)
}

// dbEnv points the server at db, when set.
func dbEnv(db string) []string {
	if db == "" {
		return nil
	}
	return []string{"STACKBONE_DB=" + db}
}
