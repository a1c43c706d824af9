-- What each run did, read back by the run inspector, usage and budgets.
-- runs: one row per run (thread_id '' for a stateless run), written with the
-- run's first checkpoint and its finish. run_steps: one row per model call
-- or tool call, written with the checkpoint the step already makes. Costs
-- are nano-dollars; NULL is an unknown price, never 0. day is the UTC day
-- of started_at (YYYY-MM-DD), for grouping the same way on every driver.
CREATE TABLE runs (
	tenant       text        NOT NULL,
	thread_id    text        NOT NULL,
	id           text        NOT NULL,
	agent        text        NOT NULL,
	key_label    text        NOT NULL DEFAULT '',
	trace_id     text        NOT NULL DEFAULT '',
	span_id      text        NOT NULL DEFAULT '',
	resumed_from text        NOT NULL DEFAULT '',
	status       text        NOT NULL,
	error        text        NOT NULL DEFAULT '',
	started_at   timestamptz NOT NULL,
	ended_at     timestamptz,
	PRIMARY KEY (tenant, thread_id, id)
);

CREATE INDEX runs_tenant_id ON runs (tenant, id);

CREATE TABLE run_steps (
	tenant           text        NOT NULL,
	id               text        NOT NULL,
	thread_id        text        NOT NULL,
	run_id           text        NOT NULL,
	agent            text        NOT NULL,
	key_label        text        NOT NULL DEFAULT '',
	kind             text        NOT NULL,
	name             text        NOT NULL,
	provider         text        NOT NULL DEFAULT '',
	response_model   text        NOT NULL DEFAULT '',
	response_id      text        NOT NULL DEFAULT '',
	tool_call_id     text        NOT NULL DEFAULT '',
	subagent         text        NOT NULL DEFAULT '',
	parent_call_id   text        NOT NULL DEFAULT '',
	started_at       timestamptz NOT NULL,
	day              text        NOT NULL,
	duration_us      bigint      NOT NULL,
	first_chunk_us   bigint,
	input_tokens     bigint      NOT NULL DEFAULT 0,
	output_tokens    bigint      NOT NULL DEFAULT 0,
	cached_tokens    bigint      NOT NULL DEFAULT 0,
	reasoning_tokens bigint      NOT NULL DEFAULT 0,
	cost_nanos       bigint,
	finish_reason    text        NOT NULL DEFAULT '',
	attempts         bigint      NOT NULL DEFAULT 0,
	outcome          text        NOT NULL,
	error            text        NOT NULL DEFAULT '',
	content          text,
	PRIMARY KEY (tenant, run_id, id)
);

CREATE INDEX run_steps_started ON run_steps (tenant, started_at);
