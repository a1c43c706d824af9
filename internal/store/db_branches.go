package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/stackbone/stackbone/internal/message"
)

// ErrThreadExists: a fork names a thread id the tenant already has.
var ErrThreadExists = errors.New("a thread with that id exists")

// MissingError is the ErrNotFound of a thread that exists but has no such
// branch or message: What is "branch" or "message", Name what was asked.
type MissingError struct {
	ThreadID string
	What     string
	Name     string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("thread %q has no %s %s: %s", e.ThreadID, e.What, e.Name, ErrNotFound)
}

// Is makes a *MissingError match ErrNotFound.
func (e *MissingError) Is(target error) bool { return target == ErrNotFound }

// Branch is one line of a thread's conversation: it grows from message
// ForkSeq of branch Parent (branch 0, the first line, from none).
type Branch struct {
	ID, Parent, ForkSeq int64
	CreatedAt           time.Time
	// ForkMessageID is the id of the message at ForkSeq ("" for branch 0).
	ForkMessageID string
	// Messages counts the branch's own messages (not its parents').
	Messages int
	// TipSeq is the last message of the branch's path: its own last, or
	// its fork when it has none yet (0: an empty thread); TipMessageID is
	// that message's id.
	TipSeq       int64
	TipMessageID string
}

// MessageRef places a stored message in its thread.
type MessageRef struct {
	ID          string
	Seq, Branch int64
}

// SetHead switches a thread's head: to Branch, or, when At is set, to the
// branch whose tip is message At (a new empty branch forking there when
// none is).
type SetHead struct {
	Tenant   string
	ThreadID string
	Branch   int64
	// At, when set, is the sequence number of the message to rewind to.
	At  int64
	Now time.Time
	// User is the end user forking ("" for a key): the fork is theirs.
	User string
}

// Fork copies a thread's path up to a message into a new thread.
type Fork struct {
	Tenant   string
	ThreadID string
	// NewID is the new thread's id.
	NewID string
	// At is the sequence number of the fork's last message (0: the head's
	// whole path).
	At  int64
	Now time.Time
	// User is the end user forking ("" for a key): the fork is theirs.
	User string
}

// branchesSQL lists a thread's branches (the first line as branch 0, from
// the thread row) with the count and the last of their own messages.
const branchesSQL = `SELECT x.id, x.parent, x.fork_seq, x.created_at, coalesce(m.n, 0), coalesce(m.last, 0) FROM (
		SELECT 0 AS id, 0 AS parent, 0 AS fork_seq, t.created_at FROM threads t WHERE t.tenant = $1 AND t.id = $2
	UNION ALL
		SELECT b.id, b.parent, b.fork_seq, b.created_at FROM branches b WHERE b.tenant = $1 AND b.thread_id = $2) x
	LEFT JOIN (SELECT branch, count(*) AS n, max(seq) AS last FROM messages WHERE tenant = $1 AND thread_id = $2 GROUP BY branch) m
		ON m.branch = x.id
	ORDER BY x.id`

// branchEndsSQL reads the messages a branch listing names: the forks and
// each branch's last message.
const branchEndsSQL = `SELECT seq, v, json FROM messages WHERE tenant = $1 AND thread_id = $2
	AND (seq IN (SELECT fork_seq FROM branches WHERE tenant = $1 AND thread_id = $2)
		OR seq IN (SELECT max(seq) FROM messages WHERE tenant = $1 AND thread_id = $2 GROUP BY branch))`

// Branches lists a thread's branches with their tips, the first line (0)
// first, then by id.
func (db *DB) Branches(ctx context.Context, tenant, threadID string) ([]Branch, error) {
	if err := CheckText("branches", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, db.invalid(err)
	}
	q := db.d.Read()
	rows, err := q.Query(ctx, branchesSQL, tenant, threadID)
	if err != nil {
		return nil, db.read("branches", err)
	}
	out, err := CollectRows(rows, func(r Rows) (*Branch, error) {
		var b Branch
		if err := r.Scan(&b.ID, &b.Parent, &b.ForkSeq, ScanTime(&b.CreatedAt), &b.Messages, &b.TipSeq); err != nil {
			return nil, err
		}
		if b.Messages == 0 {
			b.TipSeq = b.ForkSeq
		}
		return &b, nil
	})
	rows.Close()
	if err != nil {
		return nil, db.read("branches", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: branches of %q: %w", db.name, threadID, ErrNotFound)
	}
	ids, err := db.messageIDs(ctx, q, branchEndsSQL, tenant, threadID)
	if err != nil {
		return nil, db.read("branches", err)
	}
	for i := range out {
		out[i].ForkMessageID, out[i].TipMessageID = ids[out[i].ForkSeq], ids[out[i].TipSeq]
	}
	return out, nil
}

// messageIDs runs a read of messages and maps their seqs to their ids.
func (db *DB) messageIDs(ctx context.Context, q Querier, query string, args ...any) (map[int64]string, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ms, err := ScanMessages(rows)
	if err != nil {
		return nil, err
	}
	ids := make(map[int64]string, len(ms))
	for _, m := range ms {
		ids[m.Seq] = m.ID
	}
	return ids, nil
}

// BranchPath returns the conversation of a thread's branch (its path), in
// order.
func (db *DB) BranchPath(ctx context.Context, tenant, threadID string, branch int64) ([]message.Message, error) {
	if err := CheckText("branch path", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, db.invalid(err)
	}
	q := db.d.Read()
	if err := branchExists(ctx, q, tenant, threadID, branch); err != nil {
		return nil, db.read("branch path", err)
	}
	out, err := readMessages(ctx, q, chainFromSQL+pathRowsSQL, tenant, threadID, branch, int64(endless))
	if err != nil {
		return nil, db.read("branch path", err)
	}
	return out, nil
}

// branchExists returns ErrNotFound for an unknown thread, a *MissingError
// for an unknown branch of one.
func branchExists(ctx context.Context, q Querier, tenant, threadID string, branch int64) error {
	var n int64
	err := q.QueryRow(ctx, `SELECT t.branch_seq FROM threads t WHERE t.tenant = $1 AND t.id = $2`, tenant, threadID).Scan(&n)
	if errors.Is(err, ErrNoRows) {
		return fmt.Errorf("thread %q: %w", threadID, ErrNotFound)
	}
	if err != nil {
		return err
	}
	// Branch ids are given in order, none ever deleted: 0 to branch_seq.
	if branch < 0 || branch > n {
		return &MissingError{ThreadID: threadID, What: "branch", Name: fmt.Sprint(branch)}
	}
	return nil
}

// FindMessage places the thread's message with the given id (the latest,
// should a client have given two the same id).
func (db *DB) FindMessage(ctx context.Context, tenant, threadID, id string) (*MessageRef, error) {
	if err := CheckText("find message", "tenant", tenant, "threadID", threadID, "id", id); err != nil {
		return nil, db.invalid(err)
	}
	ref, err := findMessage(ctx, db.d.Read(), tenant, threadID, id)
	if err != nil {
		return nil, db.read("find message", err)
	}
	return ref, nil
}

func findMessage(ctx context.Context, q Querier, tenant, threadID, id string) (*MessageRef, error) {
	like, err := messageIDLike(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	rows, err := q.Query(ctx, `SELECT seq, branch, v, json FROM messages
		WHERE tenant = $1 AND thread_id = $2 AND json::text LIKE $3 ESCAPE '\' ORDER BY seq DESC`, tenant, threadID, like)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ref *MessageRef
	for rows.Next() && ref == nil {
		var (
			r    MessageRef
			v    int
			data []byte
		)
		if err := rows.Scan(&r.Seq, &r.Branch, &v, &data); err != nil {
			return nil, err
		}
		m, err := DecodeMessage(v, data)
		if err != nil {
			return nil, err
		}
		if m.ID == id {
			r.ID = id
			ref = &r
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if ref != nil {
		return ref, nil
	}
	if err := threadExists(ctx, q, tenant, threadID); err != nil {
		return nil, err
	}
	return nil, &MissingError{ThreadID: threadID, What: "message", Name: id}
}

// messageBranch returns the branch of the thread's message seq, a
// *MissingError when it has none.
func messageBranch(ctx context.Context, q Querier, tenant, threadID string, seq int64) (int64, error) {
	var branch int64
	err := q.QueryRow(ctx, `SELECT branch FROM messages WHERE tenant = $1 AND thread_id = $2 AND seq = $3`,
		tenant, threadID, seq).Scan(&branch)
	if errors.Is(err, ErrNoRows) {
		if err := threadExists(ctx, q, tenant, threadID); err != nil {
			return 0, err
		}
		return 0, &MissingError{ThreadID: threadID, What: "message", Name: fmt.Sprint(seq)}
	}
	return branch, err
}

// stateAt is the state as it was right after message upto of branch's
// path ({} before any write).
func stateAt(ctx context.Context, q Querier, tenant, threadID string, branch, upto int64) (json.RawMessage, error) {
	var s string
	err := q.QueryRow(ctx, stateAtSQL, tenant, threadID, branch, upto).Scan(&s)
	if errors.Is(err, ErrNoRows) {
		return json.RawMessage(`{}`), nil
	}
	return json.RawMessage(s), err
}

// StateAt returns the thread's state as it was right after message seq
// (the latest version at or before it along its path; {} if none).
func (db *DB) StateAt(ctx context.Context, tenant, threadID string, seq int64) (json.RawMessage, error) {
	if err := CheckText("state at", "tenant", tenant, "threadID", threadID); err != nil {
		return nil, db.invalid(err)
	}
	q := db.d.Read()
	branch, err := messageBranch(ctx, q, tenant, threadID, seq)
	if err != nil {
		return nil, db.read("state at", err)
	}
	st, err := stateAt(ctx, q, tenant, threadID, branch, seq)
	if err != nil {
		return nil, db.read("state at", err)
	}
	return st, nil
}

// tipBranchSQL finds the branch whose tip is message $3: the message's own
// branch when it is its last, else the first empty branch forking there.
const tipBranchSQL = `SELECT x.id FROM (
		SELECT m.branch AS id FROM messages m WHERE m.tenant = $1 AND m.thread_id = $2 AND m.seq = $3
			AND NOT EXISTS (SELECT 1 FROM messages n WHERE n.tenant = $1 AND n.thread_id = $2 AND n.branch = m.branch AND n.seq > m.seq)
	UNION ALL
		SELECT b.id FROM branches b WHERE b.tenant = $1 AND b.thread_id = $2 AND b.fork_seq = $3
			AND NOT EXISTS (SELECT 1 FROM messages n WHERE n.tenant = $1 AND n.thread_id = $2 AND n.branch = b.id)) x
	ORDER BY x.id LIMIT 1`

// SetHead switches the thread's head (see SetHead) in one transaction that
// locks the thread row first; the thread's state becomes the state at the
// new head's tip. A run holding the thread (or about to: a queued resume,
// a run whose lease lapsed and is due for recovery) is ErrRunInProgress, a
// pending decision ErrApprovalPending, and nothing changes.
func (db *DB) SetHead(ctx context.Context, h SetHead) (*Thread, error) {
	if err := CheckText("set head", "tenant", h.Tenant, "threadID", h.ThreadID); err != nil {
		return nil, db.invalid(err)
	}
	if h.Now.IsZero() {
		h.Now = db.now()
	}
	var th *Thread
	err := db.d.Write(ctx, "set head", func(tx Tx) error {
		cur, err := lockIdle(ctx, tx, h.Tenant, h.ThreadID, h.Now)
		if err != nil {
			return err
		}
		head, fresh, err := headTarget(ctx, tx, h, cur)
		if err != nil {
			return err
		}
		if fresh != nil {
			// Before the state's read, which follows the chain through it.
			tx.Queue(`INSERT INTO branches (tenant, thread_id, id, parent, fork_seq, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
				h.Tenant, h.ThreadID, fresh.ID, fresh.Parent, fresh.ForkSeq, h.Now)
		}
		state := cur.State
		if head != cur.HeadBranch {
			if state, err = stateAt(ctx, tx, h.Tenant, h.ThreadID, head, endless); err != nil {
				return err
			}
		}
		th, err = scanThread(tx.QueryRow(ctx, `UPDATE threads SET head_branch = $3, branch_seq = $4, state = $5::json, updated_at = $6
			WHERE tenant = $1 AND id = $2 RETURNING `+threadCols, h.Tenant, h.ThreadID, head, max(cur.BranchSeq, head), string(state), h.Now))
		return err
	})
	if err != nil {
		return nil, err
	}
	return th, nil
}

// lockIdle locks the thread row for a change of its head and refuses the
// change while a run holds the thread or is due to, or while a decision
// is pending on it (the admission rule of a turn, and stricter: a run
// whose lease lapsed is about to be recovered on the head it ran on).
func lockIdle(ctx context.Context, tx Tx, tenant, threadID string, now time.Time) (*Thread, error) {
	cur := Thread{ID: threadID}
	var (
		status string
		state  []byte
	)
	err := tx.QueryRow(ctx, `SELECT agent, status, lease_until, run_id, head_branch, branch_seq, state FROM threads
		WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, threadID).Scan(
		&cur.Agent, &status, ScanTime(&cur.LeaseUntil), &cur.RunID, &cur.HeadBranch, &cur.BranchSeq, &state)
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("thread %q: %w", threadID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	cur.Status, cur.State = ThreadStatus(status), json.RawMessage(state)
	if err := Admit(&cur, cur.Agent, now); err != nil {
		return nil, err
	}
	if cur.Status == Running {
		return nil, &RunInProgressError{ThreadID: threadID, Why: "its run's lease lapsed and the run is about to be recovered: "}
	}
	var pending bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM interrupts WHERE tenant = $1 AND thread_id = $2 AND status = 'pending')`,
		tenant, threadID).Scan(&pending); err != nil {
		return nil, err
	}
	if pending {
		return nil, fmt.Errorf("thread %q: %w", threadID, ErrApprovalPending)
	}
	return &cur, nil
}

// headTarget is the branch h makes the head of the locked thread cur, and
// the branch to create for it (nil: it exists).
func headTarget(ctx context.Context, tx Tx, h SetHead, cur *Thread) (int64, *Branch, error) {
	if h.At <= 0 {
		return h.Branch, nil, branchExists(ctx, tx, h.Tenant, h.ThreadID, h.Branch)
	}
	parent, err := messageBranch(ctx, tx, h.Tenant, h.ThreadID, h.At)
	if err != nil {
		return 0, nil, err
	}
	var id int64
	err = tx.QueryRow(ctx, tipBranchSQL, h.Tenant, h.ThreadID, h.At).Scan(&id)
	if err == nil || !errors.Is(err, ErrNoRows) {
		return id, nil, err
	}
	fresh := &Branch{ID: cur.BranchSeq + 1, Parent: parent, ForkSeq: h.At}
	return fresh.ID, fresh, nil
}

// forkThreadSQL creates fork $3 of thread $2 (idle, its agent, state $5
// holding $6 messages, owned by $8); no row when the id is taken.
const forkThreadSQL = `INSERT INTO threads (tenant, id, agent, status, v, state, created_at, updated_at, message_seq, owner)
	SELECT t.tenant, $3::text, t.agent, 'idle', $4::integer, $5::json, $7::timestamptz, $7::timestamptz, $6::bigint, $8::text
	FROM threads t WHERE t.tenant = $1 AND t.id = $2
	ON CONFLICT (tenant, id) DO NOTHING
	RETURNING ` + threadCols

// forkMessagesSQL copies the path of branch $3 up to message $4 into
// thread $5, numbered from 1, on its first line.
const forkMessagesSQL = `INSERT INTO messages (tenant, thread_id, seq, v, json, branch) ` + chainFromSQL + `
	SELECT m.tenant, $5::text, ROW_NUMBER() OVER (ORDER BY m.seq), m.v, m.json, 0
	FROM messages m JOIN chain c ON m.tenant = $1 AND m.thread_id = $2 AND m.branch = c.id AND m.seq <= c.upto`

// forkCountSQL counts the messages of the path of branch $3 up to $4.
const forkCountSQL = chainFromSQL + `
	SELECT count(*) FROM messages m JOIN chain c ON m.tenant = $1 AND m.thread_id = $2 AND m.branch = c.id AND m.seq <= c.upto`

// Fork creates thread f.NewID, an ordinary idle thread of the same agent
// holding a copy of f.ThreadID's path up to message f.At (renumbered from
// 1, ids kept) and the state as it was there (its first state version),
// in one transaction. A taken id is ErrThreadExists.
func (db *DB) Fork(ctx context.Context, f Fork) (*Thread, error) {
	if err := CheckText("fork", "tenant", f.Tenant, "threadID", f.ThreadID, "newID", f.NewID); err != nil {
		return nil, db.invalid(err)
	}
	if f.NewID == "" {
		return nil, db.invalid(fmt.Errorf("fork: %w: no new thread id", ErrInvalid))
	}
	if f.Now.IsZero() {
		f.Now = db.now()
	}
	var th *Thread
	err := db.d.Write(ctx, "fork", func(tx Tx) error {
		branch, upto, state, err := forkPoint(ctx, tx, f)
		if err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, forkCountSQL, f.Tenant, f.ThreadID, branch, upto).Scan(&n); err != nil {
			return err
		}
		th, err = scanThread(tx.QueryRow(ctx, forkThreadSQL, f.Tenant, f.ThreadID, f.NewID, FormatVersion, string(state), n, f.Now, f.User))
		if errors.Is(err, ErrNoRows) {
			return fmt.Errorf("fork of %q as %q: %w", f.ThreadID, f.NewID, ErrThreadExists)
		}
		if err != nil {
			return err
		}
		tx.Queue(forkMessagesSQL, f.Tenant, f.ThreadID, branch, upto, f.NewID)
		tx.Queue(stateVersionSQL, f.Tenant, f.NewID, 0, n, FormatVersion, string(state))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return th, nil
}

// forkPoint is where f copies up to: the branch and message of its path's
// end, and the state there (the head's current state for its whole path).
func forkPoint(ctx context.Context, tx Tx, f Fork) (branch, upto int64, state json.RawMessage, err error) {
	if f.At > 0 {
		if branch, err = messageBranch(ctx, tx, f.Tenant, f.ThreadID, f.At); err != nil {
			return 0, 0, nil, err
		}
		state, err = stateAt(ctx, tx, f.Tenant, f.ThreadID, branch, f.At)
		return branch, f.At, state, err
	}
	var raw []byte
	err = tx.QueryRow(ctx, `SELECT head_branch, state FROM threads WHERE tenant = $1 AND id = $2`, f.Tenant, f.ThreadID).Scan(&branch, &raw)
	if errors.Is(err, ErrNoRows) {
		return 0, 0, nil, fmt.Errorf("thread %q: %w", f.ThreadID, ErrNotFound)
	}
	return branch, endless, json.RawMessage(raw), err
}
