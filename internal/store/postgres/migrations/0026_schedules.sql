-- Schedules: agent turns that run on a cron (or @every) schedule, declared in
-- an agent file (source 'file') or created through the API (source 'api').
-- next_at is the next due firing (NULL: none, the schedule is disabled);
-- the last_* columns repeat the latest firing, for listing. thread is a
-- thread id, or 'new' for a new thread per firing; catch_up is 'one' or
-- 'none'; key_label is the key label the runs count under ('' the tenant's
-- admin).
CREATE TABLE schedules (
	tenant         text        NOT NULL,
	id             text        NOT NULL,
	name           text        NOT NULL,
	agent          text        NOT NULL,
	cron           text        NOT NULL,
	timezone       text        NOT NULL DEFAULT '',
	input          text        NOT NULL,
	thread         text        NOT NULL,
	catch_up       text        NOT NULL DEFAULT 'one' CHECK (catch_up IN ('one', 'none')),
	key_label      text        NOT NULL DEFAULT '',
	enabled        boolean     NOT NULL DEFAULT true,
	source         text        NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'file')),
	created_at     timestamptz NOT NULL,
	updated_at     timestamptz NOT NULL,
	next_at        timestamptz,
	last_due_at    timestamptz,
	last_status    text        NOT NULL DEFAULT '',
	last_error     text        NOT NULL DEFAULT '',
	last_thread_id text        NOT NULL DEFAULT '',
	last_run_id    text        NOT NULL DEFAULT '',
	PRIMARY KEY (tenant, id),
	UNIQUE (tenant, agent, name)
);

-- The due firings a scheduler claimed: one row per schedule and due time,
-- written with INSERT … ON CONFLICT DO NOTHING, so of the replicas finding
-- a firing due exactly one runs it. thread_id and run_id are chosen at the
-- claim; status is claimed, then started, then completed, waiting or
-- failed.
CREATE TABLE schedule_firings (
	tenant      text        NOT NULL,
	schedule_id text        NOT NULL,
	due_at      timestamptz NOT NULL,
	manual      boolean     NOT NULL DEFAULT false,
	owner       text        NOT NULL,
	claimed_at  timestamptz NOT NULL,
	thread_id   text        NOT NULL,
	run_id      text        NOT NULL,
	status      text        NOT NULL,
	error       text        NOT NULL DEFAULT '',
	ended_at    timestamptz,
	PRIMARY KEY (tenant, schedule_id, due_at)
);

CREATE INDEX schedules_due ON schedules (next_at) WHERE next_at IS NOT NULL AND enabled;
