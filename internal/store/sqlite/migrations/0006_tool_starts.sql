-- Exactly once under crashes: why a decision was asked (reason: approval, or
-- in_doubt for a call that may already have run before a crash), and the
-- started markers of tool calls. A marker is written, in one checkpoint per
-- batch, before a non-idempotent server tool of a durable run executes; the
-- checkpoint that stores the call's result (or its in-doubt decision)
-- deletes it. A marker without a result after a crash means the call is in
-- doubt.
ALTER TABLE interrupts ADD COLUMN reason TEXT NOT NULL DEFAULT 'approval';

CREATE TABLE tool_starts (
	tenant       TEXT    NOT NULL,
	thread_id    TEXT    NOT NULL,
	tool_call_id TEXT    NOT NULL,
	run_id       TEXT    NOT NULL,
	started_at   INTEGER NOT NULL,
	PRIMARY KEY (tenant, thread_id, tool_call_id),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
