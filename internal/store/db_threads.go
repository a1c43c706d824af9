package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stackbone/stackbone/internal/message"
)

const threadCols = `tenant, id, agent, status, run_id, v, state, last_error, lease_owner, lease_until, created_at, updated_at, options, turn_seq, turn_key, turn_digest, head_branch, branch_seq, turn_msg_seq, owner`

// linearSQL reads the messages of a thread that never branched after the
// first $3 (its sequence numbers are then its conversation's positions).
const linearSQL = `SELECT seq, v, json FROM messages WHERE tenant = $1 AND thread_id = $2 AND seq > $3 ORDER BY seq`

// chainStep is the recursive step of a chain of segments: from a
// segment's branch to its parent's, up to the fork, and so on to branch 0.
const chainStep = `
	UNION ALL
		SELECT b.parent, b.fork_seq FROM branches b JOIN chain c ON b.tenant = $1 AND b.thread_id = $2 AND b.id = c.id
		WHERE c.id <> 0)`

// chainSQL is the chain of segments a thread's conversation is made of:
// the head branch's messages (id, up to any seq), then its parent's up to
// the fork, and so on to branch 0.
const chainSQL = `WITH RECURSIVE chain(id, upto) AS (
		SELECT t.head_branch, 9223372036854775807 FROM threads t WHERE t.tenant = $1 AND t.id = $2` + chainStep

// chainFromSQL is chainSQL starting from branch $3 up to message $4
// instead of the head: the path of any branch, or of any message.
const chainFromSQL = `WITH RECURSIVE chain(id, upto) AS (
		SELECT $3::bigint, $4::bigint` + chainStep

// endless is the upto of a chain that reads a branch to its end.
const endless = 9223372036854775807

// pathRowsSQL reads, after a chain, the messages on its segments in order.
const pathRowsSQL = `
	SELECT m.seq, m.v, m.json FROM messages m JOIN chain c ON m.tenant = $1 AND m.thread_id = $2 AND m.branch = c.id AND m.seq <= c.upto
	ORDER BY m.seq`

// pathAllSQL reads a thread's whole conversation (the head's path), in
// order: for a thread that never branched, one range of its messages.
const pathAllSQL = chainSQL + pathRowsSQL

// pathSQL reads a thread's conversation (the head's path) after its first
// $3 messages, in order.
const pathSQL = chainSQL + `
	SELECT x.seq, x.v, x.json FROM (
		SELECT m.v, m.json, m.seq, ROW_NUMBER() OVER (ORDER BY m.seq) AS n
		FROM messages m JOIN chain c ON m.tenant = $1 AND m.thread_id = $2 AND m.branch = c.id AND m.seq <= c.upto) x
	WHERE x.n > $3 ORDER BY x.seq`

// scanThread scans threadCols, then extra.
func scanThread(row Row, extra ...any) (*Thread, error) {
	var (
		t              Thread
		status         string
		v              int
		state, options []byte
	)
	dest := append([]any{&t.Tenant, &t.ID, &t.Agent, &status, &t.RunID, &v, &state,
		&t.LastError, &t.LeaseOwner, ScanTime(&t.LeaseUntil), ScanTime(&t.CreatedAt), ScanTime(&t.UpdatedAt),
		&options, &t.Turn.Seq, &t.Turn.Key, &t.Turn.Digest, &t.HeadBranch, &t.BranchSeq, &t.Turn.FirstMessage, &t.Owner}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	if err := CheckFormat(v); err != nil {
		return nil, fmt.Errorf("thread %s/%s: %w", t.Tenant, t.ID, err)
	}
	t.Status = ThreadStatus(status)
	t.State = json.RawMessage(state)
	t.Options = json.RawMessage(options)
	return &t, nil
}

// GetThread returns a thread of the tenant, or ErrNotFound.
func (db *DB) GetThread(ctx context.Context, tenant, id string) (*Thread, error) {
	if err := CheckText("get thread", "tenant", tenant, "id", id); err != nil {
		return nil, db.invalid(err)
	}
	var (
		waiting   int64
		abandoned string
	)
	t, err := scanThread(db.d.Read().QueryRow(ctx,
		`SELECT `+threadCols+`, coalesce((SELECT waiting_seq FROM run_control r WHERE r.tenant = $1 AND r.thread_id = $2), 0),
			coalesce((SELECT abandoned_run FROM run_control r WHERE r.tenant = $1 AND r.thread_id = $2), '')
		FROM threads WHERE tenant = $1 AND id = $2`, tenant, id), &waiting, &abandoned)
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("%s: get thread %q: %w", db.name, id, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("get thread", err)
	}
	t.WaitingSeq = waiting
	if abandoned == t.RunID && t.Status == Running {
		t.Abandoned = true
	}
	return t, nil
}

// ListThreads lists the tenant's threads, most recently updated first.
func (db *DB) ListThreads(ctx context.Context, tenant string, f ThreadFilter) ([]Thread, error) {
	if err := f.Validate(tenant); err != nil {
		return nil, db.invalid(err)
	}
	q := strings.Builder{}
	q.WriteString(`SELECT ` + threadCols + ` FROM threads WHERE tenant = $1`)
	args := []any{tenant}
	if f.Agent != "" {
		args = append(args, f.Agent)
		q.WriteString(` AND agent = $` + strconv.Itoa(len(args)))
	}
	if f.Status != "" {
		args = append(args, string(f.Status))
		q.WriteString(` AND status = $` + strconv.Itoa(len(args)))
	}
	if f.Scoped {
		args = append(args, f.User)
		q.WriteString(` AND owner IN ('', $` + strconv.Itoa(len(args)) + `)`)
	}
	args = append(args, Limit(f.Limit, DefaultLimit))
	q.WriteString(` ORDER BY updated_at DESC, id DESC LIMIT $` + strconv.Itoa(len(args)))
	return db.queryThreads(ctx, "list threads", q.String(), args...)
}

// Stale lists, across tenants, the Queued threads and the Running threads
// whose lease expired before now, least recently updated first.
func (db *DB) Stale(ctx context.Context, now time.Time, limit int) ([]Thread, error) {
	return db.queryThreads(ctx, "stale", `SELECT `+threadCols+` FROM threads
		WHERE status IN ('queued', 'running')
			AND (status = 'queued' OR lease_until IS NULL OR lease_until < $1)
		ORDER BY updated_at, tenant, id LIMIT $2`,
		now, Limit(limit, DefaultLimit))
}

func (db *DB) queryThreads(ctx context.Context, op, query string, args ...any) ([]Thread, error) {
	rows, err := db.d.Read().Query(ctx, query, args...)
	if err != nil {
		return nil, db.read(op, err)
	}
	defer rows.Close()
	out, err := CollectRows(rows, func(r Rows) (*Thread, error) { return scanThread(r) })
	if err != nil {
		return nil, db.read(op, err)
	}
	return out, nil
}

// Messages returns the thread's messages in the order they were appended.
func (db *DB) Messages(ctx context.Context, tenant, threadID string) ([]message.Message, error) {
	if err := CheckText("messages", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, db.invalid(err)
	}
	// A thread that never branched is read as one line; a branched one (or
	// an empty one) reads nothing there and is read along its head's path.
	out, err := queryMessages(ctx, db.d.Read(), tenant, threadID, -1, false)
	if err == nil && len(out) == 0 {
		out, err = queryMessages(ctx, db.d.Read(), tenant, threadID, 0, true)
	}
	if err != nil {
		return nil, db.read("messages", err)
	}
	if len(out) == 0 {
		if err := threadExists(ctx, db.d.Read(), tenant, threadID); err != nil {
			return nil, db.read("messages", err)
		}
	}
	return out, nil
}

// pathToSQL reads the conversation that ends at message $3 of a thread:
// that message's branch up to it, then its parent's up to the fork, and so
// on to branch 0.
const pathToSQL = `WITH RECURSIVE chain(id, upto) AS (
		SELECT m.branch, m.seq FROM messages m WHERE m.tenant = $1 AND m.thread_id = $2 AND m.seq = $3` + chainStep + pathRowsSQL

// MessagesTo returns the conversation that ends at message seq of the
// thread, on whichever branch that message is.
func (db *DB) MessagesTo(ctx context.Context, tenant, threadID string, seq int64) ([]message.Message, error) {
	if err := CheckText("messages to", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, db.invalid(err)
	}
	out, err := readMessages(ctx, db.d.Read(), pathToSQL, tenant, threadID, seq)
	if err != nil {
		return nil, db.read("messages to", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: thread %q has no message %d: %w", db.name, threadID, seq, ErrNotFound)
	}
	return out, nil
}

// lineSQL reads all the messages of a thread that never branched (none
// for one that did).
const lineSQL = `SELECT seq, v, json FROM messages WHERE tenant = $1 AND thread_id = $2
	AND NOT EXISTS (SELECT 1 FROM threads t WHERE t.tenant = $1 AND t.id = $2 AND t.branch_seq > 0) ORDER BY seq`

// queryMessages reads the thread's conversation after its first after
// messages; branched says the thread has ever branched (else the cheaper
// read of its one line serves). after -1 reads all of a thread that never
// branched, and nothing of one that did.
func queryMessages(ctx context.Context, q Querier, tenant, threadID string, after int, branched bool) ([]message.Message, error) {
	query, args := linearSQL, []any{tenant, threadID, after}
	switch {
	case after < 0:
		query, args = lineSQL, args[:2]
	case branched && after == 0:
		query, args = pathAllSQL, args[:2]
	case branched:
		query = pathSQL
	}
	return readMessages(ctx, q, query, args...)
}

// readMessages runs a query of (seq, v, json) rows and decodes its
// messages.
func readMessages(ctx context.Context, q Querier, query string, args ...any) ([]message.Message, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return ScanMessages(rows)
}

// beginInsertSQL creates the thread of a new run; it returns no row when
// the thread exists (a concurrent creator's insert makes it wait for that
// commit first).
const beginInsertSQL = `INSERT INTO threads
		(tenant, id, agent, status, run_id, v, state, lease_owner, lease_until, created_at, updated_at, message_seq, event_seq, options,
		 turn_seq, turn_key, turn_digest, turn_msg_seq, owner)
	VALUES ($1, $2, $3, 'running', $4, $5, coalesce($6::json, '{}'), $7, $8, $9, $9, $10, $11, $12::json, 1, $13, $14, 1, $15)
	ON CONFLICT (tenant, id) DO NOTHING`

// beginInsertReturningSQL is beginInsertSQL returning the thread it made.
const beginInsertReturningSQL = beginInsertSQL + `
	RETURNING ` + threadCols + `, message_seq, event_seq`

// newHeld is the condition, on threads t, that the insert of beginNew
// created thread $2 of tenant $1 for run $3 at $4 (no thread that existed
// has that run and that creation time).
const newHeld = `t.tenant = $1 AND t.id = $2 AND t.run_id = $3 AND t.created_at = $4::timestamptz`

// beginNew creates the thread of b with its input and events in one round
// trip where the driver pipelines: the insert, the appends conditional on
// it having created the thread, and the read of the thread, then the
// commit. The thread existing already (another creator was first) is
// errNotHeld, and nothing was written.
func (db *DB) beginNew(ctx context.Context, b BeginRun, state any, msgs, evs []string) (*Thread, error) {
	var th *Thread
	err := db.d.Write(ctx, "begin run", func(tx Tx) error {
		tx.Queue(beginInsertSQL,
			b.Tenant, b.ThreadID, b.Agent, b.RunID, FormatVersion, state, b.Owner, TimeArg(b.LeaseUntil), b.Now,
			len(msgs), len(evs), OptionsArg(b.Options), b.Turn.Key, b.Turn.Digest, b.User)
		cond := []any{b.Tenant, b.ThreadID, b.RunID, b.Now}
		appendWhere(tx, "messages", "message_seq", newHeld, cond, -len(msgs), msgs)
		appendWhere(tx, "events", "event_seq", newHeld, cond, -len(evs), evs)
		if state != nil {
			tx.Queue(`INSERT INTO state_versions (tenant, thread_id, branch, seq, v, json)
				SELECT t.tenant, t.id, t.head_branch, t.message_seq, $5::integer, t.state FROM threads t WHERE `+newHeld,
				append(cond, FormatVersion)...)
		}
		var err error
		th, err = scanThread(tx.QueryRowLast(ctx, `SELECT `+threadCols+` FROM threads t WHERE `+newHeld, cond...))
		if errors.Is(err, ErrNoRows) {
			return errNotHeld
		}
		return err
	})
	return th, err
}

// beginUpdateSQL starts a run on an existing thread, locked and admitted
// first.
const beginUpdateSQL = `UPDATE threads SET
		status = 'running', run_id = $3, lease_owner = $4, lease_until = $5, updated_at = $6, last_error = '',
		state = coalesce($7::json, state), v = $8,
		message_seq = message_seq + $9, event_seq = event_seq + $10, options = $11::json,
		turn_seq = CASE WHEN $14 THEN turn_seq ELSE event_seq + 1 END,
		turn_key = CASE WHEN $14 THEN turn_key ELSE $12 END,
		turn_digest = CASE WHEN $14 THEN turn_digest ELSE $13 END,
		turn_msg_seq = CASE WHEN $14 THEN turn_msg_seq ELSE message_seq + 1 END
	WHERE tenant = $1 AND id = $2
	RETURNING ` + threadCols + `, message_seq, event_seq`

// BeginRun creates the thread if needed and takes its lease for a new run,
// appending the input messages and events and replacing the state if set;
// it returns the thread's messages after the first b.Known as of the commit.
func (db *DB) BeginRun(ctx context.Context, b BeginRun) (*Begun, error) {
	msgs, evs, err := b.Encode()
	if err != nil {
		return nil, fmt.Errorf("%s: begin run: %w", db.name, err)
	}
	if b.Now.IsZero() {
		b.Now = db.now()
	}
	state := StateArg(b.State)
	if b.From != 0 || b.Dequeue != "" {
		b.New = false // a branch grows (a queued turn waits) on a thread that exists
	}
	if b.New {
		th, err := db.beginNew(ctx, b, state, msgs, evs)
		if err == nil {
			StampEvents(b.Events, b.ThreadID, b.RunID, int64(len(evs)))
			return &Begun{Thread: *th, Messages: numbered(b.Input)}, nil
		}
		if !errors.Is(err, errNotHeld) {
			return nil, err
		}
		b.New = false // another creator was first: the existing thread's path
	}
	var (
		th            *Thread
		convo         []message.Message
		msgSeq, evSeq int64
		branched      bool
	)
	err = db.d.Write(ctx, "begin run", func(tx Tx) error {
		create := func() (bool, error) {
			if b.Dequeue != "" {
				return false, fmt.Errorf("queued turn %q of thread %q: %w", b.Dequeue, b.ThreadID, ErrDequeued)
			}
			if b.From != 0 {
				return false, fmt.Errorf("thread %q: begin run from message %d: %w", b.ThreadID, b.From, ErrNotFound)
			}
			var err error
			th, err = scanThread(tx.QueryRow(ctx, beginInsertReturningSQL,
				b.Tenant, b.ThreadID, b.Agent, b.RunID, FormatVersion, state, b.Owner, TimeArg(b.LeaseUntil), b.Now,
				len(msgs), len(evs), OptionsArg(b.Options), b.Turn.Key, b.Turn.Digest, b.User), &msgSeq, &evSeq)
			if errors.Is(err, ErrNoRows) {
				return false, nil
			}
			if err == nil && state != nil {
				tx.Queue(stateVersionSQL, b.Tenant, b.ThreadID, th.HeadBranch, msgSeq, FormatVersion, state)
			}
			return err == nil, err
		}
		// retake starts the run on the existing thread, locked first; no
		// thread is found false.
		retake := func() (bool, error) {
			cur := Thread{ID: b.ThreadID}
			var status string
			err := tx.QueryRow(ctx, `SELECT agent, status, lease_until, run_id, head_branch, owner FROM threads
				WHERE tenant = $1 AND id = $2 FOR UPDATE`, b.Tenant, b.ThreadID).Scan(&cur.Agent, &status, ScanTime(&cur.LeaseUntil), &cur.RunID, &cur.HeadBranch, &cur.Owner)
			if errors.Is(err, ErrNoRows) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			cur.Status = ThreadStatus(status)
			if err := b.Admit(&cur); err != nil {
				return false, err
			}
			if err := dequeue(ctx, tx, b); err != nil {
				return false, err
			}
			if branched, err = db.branchFrom(ctx, tx, b); err != nil {
				return false, err
			}
			th, err = scanThread(tx.QueryRow(ctx, beginUpdateSQL,
				b.Tenant, b.ThreadID, b.RunID, b.Owner, TimeArg(b.LeaseUntil), b.Now, state, FormatVersion, len(msgs), len(evs),
				OptionsArg(b.Options), b.Turn.Key, b.Turn.Digest, b.Continue), &msgSeq, &evSeq)
			switch {
			case err != nil || state == nil:
			case len(msgs) == 0:
				tx.Queue(stateVersionTipSQL, b.Tenant, b.ThreadID, FormatVersion, state)
			default:
				tx.Queue(stateVersionSQL, b.Tenant, b.ThreadID, th.HeadBranch, msgSeq, FormatVersion, state)
			}
			return err == nil, err
		}
		// The caller's hint picks the likely path first; a thread created
		// or found missing meanwhile takes the other.
		first, second := retake, create
		if b.New {
			first, second = create, retake
		}
		created := b.New
		var ok bool
		for try := 0; !ok; try++ {
			if try == 4 {
				return fmt.Errorf("thread %q: created and deleted meanwhile: %w", b.ThreadID, ErrUnavailable)
			}
			if ok, err = first(); err != nil {
				return err
			}
			if !ok {
				first, second, created = second, first, !created
			}
		}
		appendRows(tx, b.Tenant, b.ThreadID, th.HeadBranch, msgs, msgSeq, evs, evSeq)
		switch {
		case b.Continue:
			// A run that goes on with the thread's turn: its task works again.
			db.queuePush(ctx, tx, b.Tenant, b.ThreadID, b.Events, b.Now)
		case b.Dequeue != "":
			// A queued turn starts: the push configs registered for it
			// while it waited (turn 0) take its turn, and hear it works.
			tx.Queue(`UPDATE a2a_push_configs SET turn_seq = $1 WHERE tenant = $2 AND thread_id = $3 AND task_id = $4 AND turn_seq = 0`,
				th.Turn.Seq, b.Tenant, b.ThreadID, b.RunID)
			db.queuePush(ctx, tx, b.Tenant, b.ThreadID, b.Events, b.Now)
		}
		switch {
		case created:
			convo = numbered(b.Input)
			return nil
		case branched || b.From != 0:
			// The conversation is another one now (or may be): all of it.
			convo, err = queryMessages(ctx, tx, b.Tenant, b.ThreadID, 0, true)
			return err
		}
		convo, err = queryMessages(ctx, tx, b.Tenant, b.ThreadID, b.Known, th.BranchSeq > 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	StampEvents(b.Events, b.ThreadID, b.RunID, evSeq)
	return &Begun{Thread: *th, Messages: convo, Branched: branched}, nil
}

// numbered copies a new thread's first messages with their sequence
// numbers (1 on).
func numbered(in []message.Message) []message.Message {
	out := append([]message.Message(nil), in...)
	for i := range out {
		out[i].Seq = int64(i + 1)
	}
	return out
}

// stateVersionSQL keeps the state a write left at message seq $4 of
// branch $3 (the last version at a seq wins).
const stateVersionSQL = `INSERT INTO state_versions (tenant, thread_id, branch, seq, v, json)
	VALUES ($1, $2, $3, $4, $5, $6::json)
	ON CONFLICT (tenant, thread_id, branch, seq) DO UPDATE SET v = excluded.v, json = excluded.json`

// stateVersionHeldSQL is stateVersionSQL for a checkpoint: at the last of
// its $4 messages (the thread's counter plus $4), or at the head's tip when
// it appends none (the head may be a line the thread switched back to, whose
// tip is not the counter), on its head branch, conditional on run $3
// holding the thread.
const stateVersionHeldSQL = `INSERT INTO state_versions (tenant, thread_id, branch, seq, v, json)
	SELECT t.tenant, t.id, t.head_branch, CASE WHEN $4::bigint > 0 THEN t.message_seq + $4::bigint ELSE ` + headTipSQL + ` END,
		$5::integer, $6::json FROM threads t WHERE ` + runHeld + `
	ON CONFLICT (tenant, thread_id, branch, seq) DO UPDATE SET v = excluded.v, json = excluded.json`

// stateVersionTipSQL is stateVersionSQL at the head's tip of thread $2
// (a write that appends no message).
const stateVersionTipSQL = `INSERT INTO state_versions (tenant, thread_id, branch, seq, v, json)
	SELECT t.tenant, t.id, t.head_branch, ` + headTipSQL + `, $3::integer, $4::json FROM threads t WHERE t.tenant = $1 AND t.id = $2
	ON CONFLICT (tenant, thread_id, branch, seq) DO UPDATE SET v = excluded.v, json = excluded.json`

// headTipSQL is, on threads t, the sequence number of the last message of
// the head's path: the head's own last, else its fork (0: none).
const headTipSQL = `coalesce(
		(SELECT max(m.seq) FROM messages m WHERE m.tenant = t.tenant AND m.thread_id = t.id AND m.branch = t.head_branch),
		(SELECT b.fork_seq FROM branches b WHERE b.tenant = t.tenant AND b.thread_id = t.id AND b.id = t.head_branch), 0)`

// stateAtSQL is the state as it was at message $4 of branch $3: the
// latest version at or before it along that message's path.
// Of two versions at one seq (a branch's own, kept at its fork while it
// has no message yet, and its parent's), the branch's is the later: a
// branch's id is greater than its parent's.
const stateAtSQL = chainFromSQL + `
	SELECT s.json::text FROM state_versions s JOIN chain c ON s.tenant = $1 AND s.thread_id = $2 AND s.branch = c.id AND s.seq <= c.upto
	ORDER BY s.seq DESC, s.branch DESC LIMIT 1`

// tipSQL is the sequence number of the last message of a thread's
// conversation (0: none).
const tipSQL = chainSQL + `
	SELECT coalesce(max(m.seq), 0) FROM messages m
	JOIN chain c ON m.tenant = $1 AND m.thread_id = $2 AND m.branch = c.id AND m.seq <= c.upto`

// branchFrom makes, in BeginRun's transaction (the thread locked), a new
// head branch growing from message b.From (FromStart: before the first),
// unless b.From is none or the last message of the conversation already
// (then the turn simply goes on). branched reports whether it made one.
func (db *DB) branchFrom(ctx context.Context, tx Tx, b BeginRun) (branched bool, err error) {
	if b.From == 0 {
		return false, nil
	}
	var parent, at int64 // a branch from the start grows from branch 0 at 0
	if b.From != FromStart {
		at = b.From
		err = tx.QueryRow(ctx, `SELECT branch FROM messages WHERE tenant = $1 AND thread_id = $2 AND seq = $3`,
			b.Tenant, b.ThreadID, b.From).Scan(&parent)
		if errors.Is(err, ErrNoRows) || b.From < 0 {
			return false, fmt.Errorf("thread %q has no message %d to go on from: %w", b.ThreadID, b.From, ErrInvalid)
		}
		if err != nil {
			return false, err
		}
	}
	var tip int64
	if err := tx.QueryRow(ctx, tipSQL, b.Tenant, b.ThreadID).Scan(&tip); err != nil {
		return false, err
	}
	if tip == at {
		return false, nil
	}
	// The branch starts from the state as it was at b.From.
	restored := "{}"
	err = tx.QueryRow(ctx, stateAtSQL, b.Tenant, b.ThreadID, parent, at).Scan(&restored)
	if err != nil && !errors.Is(err, ErrNoRows) {
		return false, err
	}
	var id int64
	if err := tx.QueryRow(ctx, `UPDATE threads SET branch_seq = branch_seq + 1, head_branch = branch_seq + 1, state = $3::json
		WHERE tenant = $1 AND id = $2 RETURNING head_branch`, b.Tenant, b.ThreadID, restored).Scan(&id); err != nil {
		return false, err
	}
	tx.Queue(`INSERT INTO branches (tenant, thread_id, id, parent, fork_seq, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		b.Tenant, b.ThreadID, id, parent, at, b.Now)
	return true, nil
}

// Claim takes a Queued thread, or a Running one whose lease expired before
// c.Now, for a new run, with one conditional update.
func (db *DB) Claim(ctx context.Context, c Claim) (*Thread, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: claim: %w", db.name, err)
	}
	if c.Now.IsZero() {
		c.Now = db.now()
	}
	var th *Thread
	err := db.d.Write(ctx, "claim", func(tx Tx) error {
		var err error
		th, err = scanThread(tx.QueryRow(ctx, `UPDATE threads SET
				status = 'running', run_id = $3, lease_owner = $4, lease_until = $5, updated_at = $6, last_error = ''
			WHERE tenant = $1 AND id = $2
				AND (status = 'queued' OR (status = 'running' AND (lease_until IS NULL OR lease_until < $6)))
			RETURNING `+threadCols,
			c.Tenant, c.ThreadID, c.RunID, c.Owner, TimeArg(c.LeaseUntil), c.Now))
		if errors.Is(err, ErrNoRows) {
			if err := threadExists(ctx, tx, c.Tenant, c.ThreadID); err != nil {
				return err
			}
			return fmt.Errorf("thread %q: %w", c.ThreadID, ErrNotClaimable)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return th, nil
}

// checkpointSQL's conditional update proves the run still holds the thread
// and reserves the sequence numbers of the rows the checkpoint appended
// before it (appendHeld numbers them from the counters as they were).
const checkpointSQL = `UPDATE threads SET
		state = coalesce($1::json, state),
		lease_until = coalesce($2::timestamptz, lease_until),
		message_seq = message_seq + $3,
		event_seq = event_seq + $4
	WHERE tenant = $5 AND id = $6 AND status = 'running' AND run_id = $7
	RETURNING agent, event_seq`

// errNotHeld: the run no longer holds its thread (nothing was written).
var errNotHeld = errors.New("the run does not hold the thread")

// runHeld is the condition, on threads t, that run $3 holds thread $2 of
// tenant $1. A run's transaction locks the thread row with it first, then
// every statement holds it, so when the run lost the thread they write
// nothing.
const runHeld = `t.tenant = $1 AND t.id = $2 AND t.status = 'running' AND t.run_id = $3`

// lockHeld takes the thread row's lock for the run's transaction (the
// counters the appends number from hold until it ends); SQLite skips it.
func lockHeld(tx Tx, tenant, threadID, runID string) {
	tx.Queue(`SELECT 1 FROM threads t WHERE `+runHeld+` FOR UPDATE`, tenant, threadID, runID)
}

// Checkpoint stores a step boundary of the run in one transaction, as one
// round trip where the driver pipelines: the lock, the appends and markers
// (each conditional on the run holding the thread), the update that
// reserves what they took, and the commit. When webhooks write notices of
// new decisions (which name the thread's agent), the commit waits for the
// update's answer.
func (db *DB) Checkpoint(ctx context.Context, c Checkpoint) error {
	msgs, evs, err := c.Encode()
	if err != nil {
		return fmt.Errorf("%s: checkpoint: %w", db.name, err)
	}
	ins, err := EncodeInterrupts(c, db.now)
	if err != nil {
		return fmt.Errorf("%s: checkpoint: %w", db.name, err)
	}
	now := db.now()
	notices := len(db.webhooks) > 0 && len(ins) > 0
	var evSeq int64
	err = db.d.Write(ctx, "checkpoint", func(tx Tx) error {
		lockHeld(tx, c.Tenant, c.ThreadID, c.RunID)
		appendHeld(tx, "messages", "message_seq", c.Tenant, c.ThreadID, c.RunID, 0, msgs)
		appendHeld(tx, "events", "event_seq", c.Tenant, c.ThreadID, c.RunID, 0, evs)
		markStarts(tx, c, now)
		if len(c.State) > 0 {
			// The state as of this write's last message, kept for a branch
			// from it (before the update that reserves the messages).
			tx.Queue(stateVersionHeldSQL, c.Tenant, c.ThreadID, c.RunID, len(msgs), FormatVersion, string(c.State))
		}
		insertInterrupts(tx, c.RunID, ins)
		queueRun(tx, c.Tenant, c.ThreadID, c.RunID, c.Run, c.Steps)
		db.queuePush(ctx, tx, c.Tenant, c.ThreadID, c.Events, now)
		update := []any{StateArg(c.State), TimeArg(c.LeaseUntil), len(msgs), len(evs), c.Tenant, c.ThreadID, c.RunID}
		var agent string
		query := tx.QueryRowLast
		if notices {
			query = tx.QueryRow
		}
		err := query(ctx, checkpointSQL, update...).Scan(&agent, &evSeq)
		if errors.Is(err, ErrNoRows) {
			return errNotHeld
		}
		if err != nil || !notices {
			return err
		}
		ns, err := PendingNotices(agent, ins)
		if err != nil {
			return err
		}
		return db.notify(ctx, tx, ns...)
	})
	if err = db.notHeld(ctx, "checkpoint", err, c.Tenant, c.ThreadID, c.RunID); err != nil {
		return err
	}
	StampEvents(c.Events, c.ThreadID, c.RunID, evSeq)
	return nil
}

// notHeld turns errNotHeld into why the run does not hold the thread, read
// apart (the transaction may be over: QueryRowLast); other errors pass.
func (db *DB) notHeld(ctx context.Context, op string, err error, tenant, threadID, runID string) error {
	if !errors.Is(err, errNotHeld) {
		return err
	}
	return db.read(op, leaseLost(ctx, db.d.Read(), tenant, threadID, runID))
}

// appendHeld queues the inserts of rows into table (messages or events),
// numbered from the thread's counter (message_seq or event_seq): the
// counter plus base is the number before the first row (0 before the
// update that adds len(rows) to it; -len(rows) after). cond, on threads t
// with its arguments first, says the transaction's run holds the thread.
func appendHeld(tx Tx, table, counter, tenant, threadID, runID string, base int, rows []string) {
	appendWhere(tx, table, counter, runHeld, []any{tenant, threadID, runID}, base, rows)
}

func appendWhere(tx Tx, table, counter, cond string, condArgs []any, base int, rows []string) {
	p := len(condArgs)
	for off := 0; off < len(rows); off += insertChunk {
		n := min(insertChunk, len(rows)-off)
		args := append(append(make([]any, 0, p+2+n), condArgs...), base+off, FormatVersion)
		var x strings.Builder
		for i, r := range rows[off : off+n] {
			if i > 0 {
				x.WriteString(` UNION ALL `)
			}
			fmt.Fprintf(&x, `SELECT %d AS k, $%d::json AS j`, i+1, p+3+i)
			args = append(args, r)
		}
		// A message goes on the thread's head branch.
		cols, vals := "", ""
		if table == "messages" {
			cols, vals = ", branch", ", t.head_branch"
		}
		tx.Queue(fmt.Sprintf(`INSERT INTO %s (tenant, thread_id, seq, v, json%s)
			SELECT t.tenant, t.id, t.%s + $%d::bigint + x.k, $%d::integer, x.j%s
			FROM threads t, (%s) x WHERE %s`, table, cols, counter, p+1, p+2, vals, x.String(), cond), args...)
	}
}

// FinishRun ends the run: the thread takes f.Status (Queued instead of
// Waiting when no decision is pending any more) and its lease is released.
func (db *DB) FinishRun(ctx context.Context, f FinishRun) error {
	evs, err := f.Encode()
	if err != nil {
		return fmt.Errorf("%s: finish run: %w", db.name, err)
	}
	if f.Now.IsZero() {
		f.Now = db.now()
	}
	var evSeq int64
	notice := len(db.webhooks) > 0
	err = db.d.Write(ctx, "finish run", func(tx Tx) error {
		// The lock comes first, so the update reads the interrupts after
		// any decision that took it before: a decision can land between
		// the checkpoint that stored the interrupts and this call, while
		// the thread is still Running; then nothing is left to wait for
		// and the resume is due at once. The events are numbered from the
		// counter before the update adds them.
		lockHeld(tx, f.Tenant, f.ThreadID, f.RunID)
		appendHeld(tx, "events", "event_seq", f.Tenant, f.ThreadID, f.RunID, 0, evs)
		queueRun(tx, f.Tenant, f.ThreadID, f.RunID, f.Run, f.Steps)
		db.queuePush(ctx, tx, f.Tenant, f.ThreadID, f.Events, f.Now)
		query := tx.QueryRowLast
		if notice {
			query = tx.QueryRow
		}
		var (
			agent, status string
			backlog       int64
		)
		err := query(ctx, `UPDATE threads SET
				status = CASE WHEN $1::text = 'waiting' AND NOT EXISTS (
						SELECT 1 FROM interrupts WHERE tenant = $5 AND thread_id = $6 AND status = 'pending')
					THEN 'queued' ELSE $1 END,
				last_error = $2, lease_owner = '', lease_until = NULL, updated_at = $3,
				event_seq = event_seq + $4
			WHERE tenant = $5 AND id = $6 AND status = 'running' AND run_id = $7
			RETURNING event_seq, agent, status,
				CASE WHEN EXISTS (SELECT 1 FROM turn_queue q WHERE q.tenant = $5 AND q.thread_id = $6) THEN 1 ELSE 0 END`,
			string(f.Status), CleanText(f.Error), f.Now, len(evs), f.Tenant, f.ThreadID, f.RunID,
		).Scan(&evSeq, &agent, &status, &backlog)
		if errors.Is(err, ErrNoRows) {
			return errNotHeld
		}
		if f.Queued != nil {
			*f.Queued = err == nil && status == string(Queued)
		}
		if f.Backlog != nil {
			*f.Backlog = err == nil && backlog != 0
		}
		if err != nil || !notice {
			return err
		}
		n, ok, err := RunNotice(f.Tenant, agent, f.ThreadID, f.RunID, f.Status, CleanText(f.Error), f.Now)
		if !ok {
			return err
		}
		return db.notify(ctx, tx, n)
	})
	if err = db.notHeld(ctx, "finish run", err, f.Tenant, f.ThreadID, f.RunID); err != nil {
		return err
	}
	StampEvents(f.Events, f.ThreadID, f.RunID, evSeq)
	return nil
}

// ReleaseRun gives up the run's lease without ending it: the thread stays
// running with no lease, so Stale lists it and Claim takes it at once.
func (db *DB) ReleaseRun(ctx context.Context, r ReleaseRun) error {
	if err := CheckText("release run", "tenant", r.Tenant, "threadID", r.ThreadID, "runID", r.RunID); err != nil {
		return db.invalid(err)
	}
	if r.Now.IsZero() {
		r.Now = db.now()
	}
	return db.d.Write(ctx, "release run", func(tx Tx) error {
		n, err := tx.Exec(ctx, `UPDATE threads SET lease_owner = '', lease_until = NULL, updated_at = $1
			WHERE tenant = $2 AND id = $3 AND status = 'running' AND run_id = $4`,
			r.Now, r.Tenant, r.ThreadID, r.RunID)
		if err != nil {
			return err
		}
		if n == 0 {
			return leaseLost(ctx, tx, r.Tenant, r.ThreadID, r.RunID)
		}
		return nil
	})
}

// insertChunk is how many rows one multi-row INSERT holds at most, so the
// statement texts (prepared and cached by the drivers) stay few.
const insertChunk = 16

// queueInsert queues the multi-row inserts of rows (each of the columns
// cols names) into table, in chunks of insertChunk.
func queueInsert(tx Tx, head string, ncols int, rows [][]any) {
	for len(rows) > 0 {
		n := min(len(rows), insertChunk)
		args := make([]any, 0, n*ncols)
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		tx.Queue(head+` VALUES `+valuesRows(1, n, ncols), args...)
		rows = rows[n:]
	}
}

// appendRows queues the inserts of msgs (on branch) and evs, whose last
// sequence numbers are lastMsg and lastEv (the thread's counters after the
// reservation).
func appendRows(tx Tx, tenant, threadID string, branch int64, msgs []string, lastMsg int64, evs []string, lastEv int64) {
	if len(msgs) > 0 {
		first := lastMsg - int64(len(msgs)) + 1
		rows := make([][]any, len(msgs))
		for i, j := range msgs {
			rows[i] = []any{tenant, threadID, first + int64(i), FormatVersion, j, branch}
		}
		queueInsert(tx, `INSERT INTO messages (tenant, thread_id, seq, v, json, branch)`, 6, rows)
	}
	if len(evs) > 0 {
		first := lastEv - int64(len(evs)) + 1
		rows := make([][]any, len(evs))
		for i, j := range evs {
			rows[i] = []any{tenant, threadID, first + int64(i), FormatVersion, j}
		}
		queueInsert(tx, `INSERT INTO events (tenant, thread_id, seq, v, json)`, 5, rows)
	}
}

// markStarts queues the writes of the started markers of c.Started and the
// deletes of those of the calls c settles (Checkpoint.Unmarked), when the
// run holds the thread.
func markStarts(tx Tx, c Checkpoint, now time.Time) {
	if un := c.Unmarked(); len(un) > 0 {
		args := append([]any{c.Tenant, c.ThreadID, c.RunID}, anys(un)...)
		tx.Queue(`DELETE FROM tool_starts WHERE tenant = $1 AND thread_id = $2 AND tool_call_id IN (`+Params(4, len(un))+`)
			AND EXISTS (SELECT 1 FROM threads t WHERE `+runHeld+`)`, args...)
	}
	for _, id := range c.Started {
		tx.Queue(`INSERT INTO tool_starts (tenant, thread_id, tool_call_id, run_id, started_at)
			SELECT t.tenant, t.id, $4::text, t.run_id, $5::timestamptz FROM threads t WHERE `+runHeld+`
			ON CONFLICT (tenant, thread_id, tool_call_id) DO UPDATE SET run_id = excluded.run_id, started_at = excluded.started_at`,
			c.Tenant, c.ThreadID, c.RunID, id, now)
	}
}

// anys converts strings to arguments.
func anys(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
