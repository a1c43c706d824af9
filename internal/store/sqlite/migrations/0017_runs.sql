-- What each run did, read back by the run inspector, usage and budgets.
-- runs: one row per run (thread_id '' for a stateless run), written with the
-- run's first checkpoint and its finish. run_steps: one row per model call
-- or tool call, written with the checkpoint the step already makes. Costs
-- are nano-dollars; NULL is an unknown price, never 0. day is the UTC day
-- of started_at (YYYY-MM-DD), for grouping the same way on every driver.
CREATE TABLE runs (
	tenant       TEXT    NOT NULL,
	thread_id    TEXT    NOT NULL,
	id           TEXT    NOT NULL,
	agent        TEXT    NOT NULL,
	key_label    TEXT    NOT NULL DEFAULT '',
	trace_id     TEXT    NOT NULL DEFAULT '',
	span_id      TEXT    NOT NULL DEFAULT '',
	resumed_from TEXT    NOT NULL DEFAULT '',
	status       TEXT    NOT NULL,
	error        TEXT    NOT NULL DEFAULT '',
	started_at   INTEGER NOT NULL,
	ended_at     INTEGER,
	PRIMARY KEY (tenant, thread_id, id)
) STRICT, WITHOUT ROWID;

CREATE INDEX runs_tenant_id ON runs (tenant, id);

CREATE TABLE run_steps (
	tenant           TEXT    NOT NULL,
	id               TEXT    NOT NULL,
	thread_id        TEXT    NOT NULL,
	run_id           TEXT    NOT NULL,
	agent            TEXT    NOT NULL,
	key_label        TEXT    NOT NULL DEFAULT '',
	kind             TEXT    NOT NULL,
	name             TEXT    NOT NULL,
	provider         TEXT    NOT NULL DEFAULT '',
	response_model   TEXT    NOT NULL DEFAULT '',
	response_id      TEXT    NOT NULL DEFAULT '',
	tool_call_id     TEXT    NOT NULL DEFAULT '',
	subagent         TEXT    NOT NULL DEFAULT '',
	parent_call_id   TEXT    NOT NULL DEFAULT '',
	started_at       INTEGER NOT NULL,
	day              TEXT    NOT NULL,
	duration_us      INTEGER NOT NULL,
	first_chunk_us   INTEGER,
	input_tokens     INTEGER NOT NULL DEFAULT 0,
	output_tokens    INTEGER NOT NULL DEFAULT 0,
	cached_tokens    INTEGER NOT NULL DEFAULT 0,
	reasoning_tokens INTEGER NOT NULL DEFAULT 0,
	cost_nanos       INTEGER,
	finish_reason    TEXT    NOT NULL DEFAULT '',
	attempts         INTEGER NOT NULL DEFAULT 0,
	outcome          TEXT    NOT NULL,
	error            TEXT    NOT NULL DEFAULT '',
	content          TEXT,
	PRIMARY KEY (tenant, run_id, id)
) STRICT, WITHOUT ROWID;

CREATE INDEX run_steps_started ON run_steps (tenant, started_at);
