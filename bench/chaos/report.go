package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/model/modeltest"
)

// report holds the figures of one run and the invariants they check.
type report struct {
	opts       options
	idempotent bool // the build took tool({ idempotent: true })
	kills      int
	wall       time.Duration

	turns, acked, gaveUp, threads int
	gaveUpBy                      map[string]int // last failure of the turns given up on
	attempts, approvals           int
	retries                       map[retryCause]int

	effects         int     // side effects the ledger saw
	doubleEffects   int     // non-idempotent calls whose effect happened more than once
	keyMismatch     int     // idempotent calls repeated without one stable key
	idemRepeats     int     // idempotent calls repeated with their key (allowed)
	doubleTurnCalls int     // turns whose side effect ran under more than one call
	doubleStored    int     // turns whose user message is stored more than once
	doubleAnswers   int     // turns answered more than once
	answersPerUser  int     // of which: two answers after one stored user message
	lostAcked       int     // acknowledged turns not stored with their answer
	inDoubt         int     // pending decisions with reason in_doubt
	otherPending    int     // other pending decisions
	stuck           int     // threads still running or queued after settling
	refused         []*turn // probe turns refused by threads not waiting on a decision
	failedThreads   int     // threads whose last run failed
	modelCalls      int
	extraModelCalls int // model calls beyond the 2 a turn needs
	closedSilently  int // calls with a side effect whose stored result is "interrupted"
	abandoned       int // turns the client left for the thread's next message

	examples []string // a few violations, for the reader
}

// check derives the figures from what the clients saw, the stored threads,
// the ledger and the model's request log.
func (r *report) check(d *driver, threads map[string]*threadView, effects []effect, reqs []modeltest.RecordedRequest) {
	r.retries, r.approvals = d.retries, d.approvals
	r.turns, r.threads = len(d.turns), len(threads)
	r.gaveUpBy = map[string]int{}
	example := func(format string, args ...any) {
		if len(r.examples) < 8 {
			r.examples = append(r.examples, fmt.Sprintf(format, args...))
		}
	}
	for _, t := range d.turns {
		r.attempts += t.attempts
		if t.abandoned {
			r.abandoned++
		}
		if t.acked {
			r.acked++
		} else {
			r.gaveUp++
			r.gaveUpBy[t.why]++
		}
	}

	// Side effects, by call and by turn.
	r.effects = len(effects)
	type callKey struct{ tool, thread, call string }
	byCall := map[callKey][]effect{}
	callsOfTurn := map[string]map[string]bool{}
	for _, e := range effects {
		k := callKey{e.Tool, e.Thread, e.Call}
		byCall[k] = append(byCall[k], e)
		if callsOfTurn[e.Turn] == nil {
			callsOfTurn[e.Turn] = map[string]bool{}
		}
		callsOfTurn[e.Turn][e.Call] = true
	}
	for k, es := range byCall {
		if len(es) < 2 {
			continue
		}
		switch {
		case k.tool == "reserve" && r.idempotent && sameKey(es):
			r.idemRepeats++
		case k.tool == "reserve" && r.idempotent:
			r.keyMismatch++
			example("idempotent call %s ran %d times without one stable key: %q", k.call, len(es), keys(es))
		default:
			r.doubleEffects++
			example("%s call %s (turn %q) ran %d times", k.tool, k.call, es[0].Turn, len(es))
		}
	}
	for turnText, calls := range callsOfTurn {
		if len(calls) > 1 { // a new call has a new idempotency key: a second reservation too
			r.doubleTurnCalls++
			example("turn %q ran its side effect under %d calls", turnText, len(calls))
		}
	}

	// A call whose side effect happened must never be closed without a
	// decision: its stored result is the tool's, or it waits in doubt (or
	// a human answered the in-doubt decision); never the result a new turn
	// used to give it, "interrupted".
	effected := map[string]bool{}
	for _, e := range effects {
		if e.Tool != "reserve" {
			effected[e.Thread+"\x00"+e.Call] = true
		}
	}
	for id, th := range threads {
		for _, m := range th.Messages {
			if m.Role == "tool" && effected[id+"\x00"+m.ToolCallID] && strings.Contains(m.Content, "interrupted before it completed") {
				r.closedSilently++
				example("thread %s: call %s had its side effect and was closed as interrupted, nobody asked", id, m.ToolCallID)
			}
		}
	}

	// Stored turns and answers.
	for id, th := range threads {
		switch th.Status {
		case "running", "queued":
			r.stuck++
			example("thread %s is still %s", id, th.Status)
		case "failed":
			r.failedThreads++
		}
		for _, p := range th.Pending {
			if p.Reason == "in_doubt" {
				r.inDoubt++
			} else {
				r.otherPending++
			}
		}
		users, answers := map[string]int{}, map[string]int{}
		since := 0 // final answers since the last user message
		for _, m := range th.Messages {
			switch {
			case m.Role == "user":
				users[m.Content]++
				since = 0
			case m.Role == "assistant" && len(m.ToolCalls) == 0:
				answers[strings.TrimPrefix(m.Content, "Done: ")]++
				if since++; since == 2 {
					r.answersPerUser++
					example("thread %s: a user message answered twice (%q)", id, m.Content)
				}
			}
		}
		for text, n := range users {
			if n > 1 {
				r.doubleStored++
				example("turn %q is stored %d times", text, n)
			}
		}
		for text, n := range answers {
			if n > 1 {
				r.doubleAnswers++
				example("turn %q is answered %d times", text, n)
			}
		}
	}
	for _, t := range d.turns {
		if t.acked && !stored(threads[t.thread], t.text) {
			r.lostAcked++
			example("acknowledged turn %q is not stored with its answer", t.text)
		}
	}

	// Model calls per turn (the last user message names the turn).
	perTurn := map[string]int{}
	for _, q := range reqs {
		r.modelCalls++
		for i := len(q.Request.Messages) - 1; i >= 0; i-- {
			if m := q.Request.Messages[i]; m.Role == "user" {
				perTurn[m.Content]++
				break
			}
		}
	}
	for _, n := range perTurn {
		r.extraModelCalls += max(n-2, 0)
	}
}

// stored reports whether th holds the turn's user message and its answer.
func stored(th *threadView, text string) bool {
	if th == nil {
		return false
	}
	user, answer := false, false
	for _, m := range th.Messages {
		user = user || m.Role == "user" && m.Content == text
		answer = answer || m.Role == "assistant" && m.Content == "Done: "+text
	}
	return user && answer
}

func sameKey(es []effect) bool {
	for _, e := range es {
		if e.Key == "" || e.Key != es[0].Key {
			return false
		}
	}
	return true
}

func keys(es []effect) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}

// invariant is one promise and whether the run kept it.
type invariant struct {
	name string
	bad  int
}

func (r *report) invariants() []invariant {
	return []invariant{
		{"a tool call's side effect happens at most once (idempotent tools: repeats carry one key)", r.doubleEffects + r.keyMismatch},
		{"a turn's side effect is not repeated under a new call", r.doubleTurnCalls},
		{"no user message stored twice for one turn", r.doubleStored},
		{"no turn answered twice", r.doubleAnswers},
		{"every acknowledged turn is stored with its answer", r.lostAcked},
		{"no started call closed without a decision (a side effect, then \"interrupted\")", r.closedSilently},
		{"no thread stuck (running or queued after settling)", r.stuck},
		{"every thread not waiting on a decision takes a new turn (no 409 forever)", len(r.refused)},
	}
}

// ok reports whether every invariant held.
func (r *report) ok() bool {
	for _, iv := range r.invariants() {
		if iv.bad > 0 {
			return false
		}
	}
	return true
}

// write prints the figures and the invariants as Markdown.
func (r *report) write(w io.Writer) {
	o := r.opts
	target := "SQLite, 1 server"
	if o.store == "postgres" {
		target = fmt.Sprintf("PostgreSQL, %d replicas on one schema", o.replicas)
	}
	idem := "reserve is idempotent: true"
	if !r.idempotent {
		idem = "this build refuses tool({ idempotent }): reserve ran as a plain tool"
	}
	fmt.Fprintf(w, "Stackbone chaos harness (bench/chaos): %s; %d clients, %d turns per thread, lease %s, "+
		"client retries ≤ %d (Idempotency-Key: %t), seed %d, %d CPUs; %s; turn kinds: %.0f%% payout (approval), %.0f%% charge "+
		"(slow: %s after its effect, no approval), the rest refund and reserve; %.0f%% of clients send the next message after a "+
		"connection error or a 5xx instead of retrying.\n\n",
		target, o.concurrency, o.perThread, o.lease, o.maxRetries, o.idempotencyKey, o.seed, runtime.NumCPU(), idem,
		100*o.approvalShare, 100*o.slowShare, o.slowFor, 100*o.nextShare)
	var causes []string
	for _, c := range []retryCause{causeConn, causeConflict, causeLimited, causeServer, causeTimeout} {
		if n := r.retries[c]; n > 0 {
			causes = append(causes, fmt.Sprintf("%d %s", n, c))
		}
	}
	for c, n := range r.retries {
		if !slices.Contains([]retryCause{causeConn, causeConflict, causeLimited, causeServer, causeTimeout}, c) {
			causes = append(causes, fmt.Sprintf("%d %s (x-should-retry: true)", n, c))
		}
	}
	retries := 0
	for _, n := range r.retries {
		retries += n
	}
	retryRow := fmt.Sprint(retries)
	if len(causes) > 0 {
		retryRow += " (" + strings.Join(causes, ", ") + ")"
	}
	rows := [][2]string{
		{"turns sent", fmt.Sprint(r.turns)},
		{"turns acknowledged (the client got the answer)", fmt.Sprint(r.acked)},
		{"turns the client gave up on (last answer)", withCounts(r.gaveUp, r.gaveUpBy)},
		{"of which left for the thread's next message (-next-after-error)", fmt.Sprint(r.abandoned)},
		{"threads", fmt.Sprint(r.threads)},
		{"kills (SIGKILL)", fmt.Sprint(r.kills)},
		{"approvals given (payout turns)", fmt.Sprint(r.approvals)},
		{"client retries", retryRow},
		{"side effects", fmt.Sprint(r.effects)},
		{"double side effects (same call)", fmt.Sprint(r.doubleEffects)},
		{"calls closed as interrupted after their side effect", fmt.Sprint(r.closedSilently)},
		{"idempotent repeats with one key (allowed)", fmt.Sprint(r.idemRepeats)},
		{"idempotent repeats without one key", fmt.Sprint(r.keyMismatch)},
		{"turns whose side effect ran under 2+ calls", fmt.Sprint(r.doubleTurnCalls)},
		{"double stored turns", fmt.Sprint(r.doubleStored)},
		{"double answers (of which two answers follow one stored user message)", fmt.Sprintf("%d (%d)", r.doubleAnswers, r.answersPerUser)},
		{"acknowledged turns lost", fmt.Sprint(r.lostAcked)},
		{"in-doubt decisions pending", fmt.Sprint(r.inDoubt)},
		{"other decisions pending", fmt.Sprint(r.otherPending)},
		{"threads whose last run failed", fmt.Sprint(r.failedThreads)},
		{"stuck threads (still running or queued; refusing a new turn)", fmt.Sprintf("%d; %d", r.stuck, len(r.refused))},
		{"model calls (beyond 2 per turn)", fmt.Sprintf("%d (%d)", r.modelCalls, r.extraModelCalls)},
		{"wall time", r.wall.Round(100 * time.Millisecond).String()},
	}
	fmt.Fprintln(w, "| figure | value |")
	fmt.Fprintln(w, "|---|---|")
	for _, row := range rows {
		fmt.Fprintf(w, "| %s | %s |\n", row[0], row[1])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| invariant | violations | |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, iv := range r.invariants() {
		verdict := "holds"
		if iv.bad > 0 {
			verdict = "**FAILS**"
		}
		fmt.Fprintf(w, "| %s | %d | %s |\n", iv.name, iv.bad, verdict)
	}
	if len(r.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range r.examples {
			fmt.Fprintln(w, "- "+e)
		}
	}
}

// withCounts renders n and, when there are any, its tally.
func withCounts(n int, m map[string]int) string {
	if len(m) == 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d (%s)", n, counts(m))
}

// counts renders a tally as "3 409 run_in_progress, 1 connection error",
// largest first.
func counts(m map[string]int) string {
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range m {
		all = append(all, kv{k, n})
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Or(b.n-a.n, strings.Compare(a.k, b.k)) })
	var out []string
	for _, x := range all {
		out = append(out, fmt.Sprintf("%d %s", x.n, x.k))
	}
	return strings.Join(out, ", ")
}
