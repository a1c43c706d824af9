package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stackbone/stackbone/internal/event"
	"github.com/stackbone/stackbone/internal/ids"
)

var _ PushStore = (*DB)(nil)

const pushCols = `tenant, id, task_id, thread_id, turn_seq, url, token, auth_scheme, auth_credentials, created_at`

func scanPushConfig(row Row) (*PushConfig, error) {
	var c PushConfig
	if err := row.Scan(&c.Tenant, &c.ID, &c.TaskID, &c.ThreadID, &c.TurnSeq, &c.URL, &c.Token, &c.AuthScheme,
		&c.AuthCredentials, ScanTime(&c.CreatedAt)); err != nil {
		return nil, err
	}
	return &c, nil
}

// SetPushEncoder sets the encoder of A2A push notification bodies.
func (db *DB) SetPushEncoder(enc PushEncoder) { db.push = enc }

// queuePush queues, in tx, one outbox delivery per push config of the
// thread's current turn for each of evs the encoder encodes. Nothing is
// read: a thread without configs inserts no row.
func (db *DB) queuePush(ctx context.Context, tx Tx, tenant, threadID string, evs []event.Event, at time.Time) {
	if db.push == nil {
		return
	}
	var tp string
	for _, e := range evs {
		if !pushStatusEvent(e) {
			continue
		}
		body, ok := db.push(threadID, e)
		if !ok || !validPushBody(body) {
			continue
		}
		if tp == "" {
			tp = traceParent(ctx)
		}
		tx.Queue(`INSERT INTO webhook_outbox (id, endpoint, tenant, type, data, created_at, next_at, traceparent)
			SELECT $1::text, '`+PushEndpointPrefix+`' || p.id, p.tenant, $2::text, replace($3::text, '`+PushTaskID+`', p.task_id)::json,
				$4::timestamptz, $4::timestamptz, $5::text
			FROM a2a_push_configs p JOIN threads t ON t.tenant = p.tenant AND t.id = p.thread_id AND t.turn_seq = p.turn_seq
			WHERE p.tenant = $6 AND p.thread_id = $7`,
			ids.New("msg"), NoticeA2APush, string(body), at, tp, tenant, threadID)
	}
}

// CreatePushConfig stores a push notification config, at most
// MaxPushConfigs per task (a config of the same id is replaced).
func (db *DB) CreatePushConfig(ctx context.Context, c PushConfig) error {
	if err := CheckText("create push config", "tenant", c.Tenant, "id", c.ID, "taskID", c.TaskID, "threadID", c.ThreadID,
		"url", c.URL, "token", c.Token, "authScheme", c.AuthScheme, "authCredentials", c.AuthCredentials); err != nil {
		return db.invalid(err)
	}
	if c.ID == "" || c.TaskID == "" || c.ThreadID == "" || c.URL == "" {
		return db.invalid(fmt.Errorf("create push config: id, task, thread and url are required: %w", ErrInvalid))
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = db.now()
	}
	return db.d.Write(ctx, "create push config", func(tx Tx) error {
		// The thread's row lock orders the config with the transactions
		// that write the turn's events (each locks it first): one that
		// commits after this one queues its notification for the config;
		// one that committed before is read by the caller after this one.
		tx.Queue(`SELECT 1 FROM threads WHERE tenant = $1 AND id = $2 FOR UPDATE`, c.Tenant, c.ThreadID)
		tx.Queue(`DELETE FROM a2a_push_configs WHERE tenant = $1 AND id = $2 AND task_id = $3`, c.Tenant, c.ID, c.TaskID)
		n, err := tx.Exec(ctx, `INSERT INTO a2a_push_configs (`+pushCols+`)
			SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint, $6::text, $7::text, $8::text, $9::text, $10::timestamptz
			WHERE (SELECT count(*) FROM a2a_push_configs WHERE tenant = $1 AND task_id = $3) < $11::bigint
			ON CONFLICT DO NOTHING`,
			c.Tenant, c.ID, c.TaskID, c.ThreadID, c.TurnSeq, c.URL, c.Token, c.AuthScheme, c.AuthCredentials, c.CreatedAt, MaxPushConfigs)
		if err != nil || n > 0 {
			return err
		}
		var taken int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM a2a_push_configs WHERE tenant = $1 AND id = $2`, c.Tenant, c.ID).Scan(&taken); err != nil {
			return err
		}
		if taken > 0 {
			return fmt.Errorf("push config %q: %w", c.ID, ErrPushConfigTaken)
		}
		return fmt.Errorf("task %q: %w", c.TaskID, ErrPushConfigLimit)
	})
}

// GetPushConfig returns one push notification config.
func (db *DB) GetPushConfig(ctx context.Context, tenant, taskID, id string) (*PushConfig, error) {
	if err := CheckText("get push config", "tenant", tenant, "taskID", taskID, "id", id); err != nil {
		return nil, db.invalid(err)
	}
	c, err := scanPushConfig(db.d.Read().QueryRow(ctx, `SELECT `+pushCols+` FROM a2a_push_configs
		WHERE tenant = $1 AND id = $2 AND ($3::text = '' OR task_id = $3)`, tenant, id, taskID))
	if errors.Is(err, ErrNoRows) {
		return nil, fmt.Errorf("push config %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, db.read("get push config", err)
	}
	return c, nil
}

// ListPushConfigs lists a task's push notification configs, oldest first.
func (db *DB) ListPushConfigs(ctx context.Context, tenant, taskID string) ([]PushConfig, error) {
	if err := CheckText("list push configs", "tenant", tenant, "taskID", taskID); err != nil {
		return nil, db.invalid(err)
	}
	rows, err := db.d.Read().Query(ctx, `SELECT `+pushCols+` FROM a2a_push_configs WHERE tenant = $1 AND task_id = $2
		ORDER BY created_at, id`, tenant, taskID)
	if err != nil {
		return nil, db.read("list push configs", err)
	}
	defer rows.Close()
	out, err := CollectRows(rows, func(r Rows) (*PushConfig, error) { return scanPushConfig(r) })
	if err != nil {
		return nil, db.read("list push configs", err)
	}
	return out, nil
}

// DeletePushConfig deletes a push notification config and the deliveries
// to it not yet made.
func (db *DB) DeletePushConfig(ctx context.Context, tenant, taskID, id string) error {
	if err := CheckText("delete push config", "tenant", tenant, "taskID", taskID, "id", id); err != nil {
		return db.invalid(err)
	}
	return db.d.Write(ctx, "delete push config", func(tx Tx) error {
		tx.Queue(`DELETE FROM webhook_outbox WHERE endpoint = $1 AND tenant = $2 AND status = 'pending'`, PushEndpoint(id), tenant)
		_, err := tx.Exec(ctx, `DELETE FROM a2a_push_configs WHERE tenant = $1 AND id = $2 AND task_id = $3`, tenant, id, taskID)
		return err
	})
}

// QueuePush queues one push notification to the tenant's config id, with
// the given body (a StreamResponse; PushTaskID, if there, becomes the
// config's task id): a status the task reached before its config was
// stored. A config that is not there queues nothing.
func (db *DB) QueuePush(ctx context.Context, tenant, id string, body []byte) error {
	if err := CheckText("queue push", "tenant", tenant, "id", id); err != nil {
		return db.invalid(err)
	}
	if !validPushBody(body) {
		return db.invalid(fmt.Errorf("queue push: the body is not a JSON object: %w", ErrInvalid))
	}
	now := db.now()
	return db.d.Write(ctx, "queue push", func(tx Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO webhook_outbox (id, endpoint, tenant, type, data, created_at, next_at, traceparent)
			SELECT $1::text, '`+PushEndpointPrefix+`' || p.id, p.tenant, $2::text, replace($3::text, '`+PushTaskID+`', p.task_id)::json,
				$4::timestamptz, $4::timestamptz, $5::text
			FROM a2a_push_configs p WHERE p.tenant = $6 AND p.id = $7`,
			ids.New("msg"), NoticeA2APush, string(body), now, traceParent(ctx), tenant, id)
		return err
	})
}
