-- Schedules: agent turns that run on a cron (or @every) schedule, declared in
-- an agent file (source 'file') or created through the API (source 'api').
-- next_at is the next due firing (NULL: none, the schedule is disabled);
-- the last_* columns repeat the latest firing, for listing. thread is a
-- thread id, or 'new' for a new thread per firing; catch_up is 'one' or
-- 'none'; key_label is the key label the runs count under ('' the tenant's
-- admin).
CREATE TABLE schedules (
	tenant         TEXT    NOT NULL,
	id             TEXT    NOT NULL,
	name           TEXT    NOT NULL,
	agent          TEXT    NOT NULL,
	cron           TEXT    NOT NULL,
	timezone       TEXT    NOT NULL DEFAULT '',
	input          TEXT    NOT NULL,
	thread         TEXT    NOT NULL,
	catch_up       TEXT    NOT NULL DEFAULT 'one' CHECK (catch_up IN ('one', 'none')),
	key_label      TEXT    NOT NULL DEFAULT '',
	enabled        INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
	source         TEXT    NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'file')),
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	next_at        INTEGER,
	last_due_at    INTEGER,
	last_status    TEXT    NOT NULL DEFAULT '',
	last_error     TEXT    NOT NULL DEFAULT '',
	last_thread_id TEXT    NOT NULL DEFAULT '',
	last_run_id    TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (tenant, id),
	UNIQUE (tenant, agent, name)
) STRICT, WITHOUT ROWID;

-- The due firings a scheduler claimed: one row per schedule and due time,
-- written with INSERT … ON CONFLICT DO NOTHING, so of the replicas finding
-- a firing due exactly one runs it. thread_id and run_id are chosen at the
-- claim; status is claimed, then started, then completed, waiting or
-- failed.
CREATE TABLE schedule_firings (
	tenant      TEXT    NOT NULL,
	schedule_id TEXT    NOT NULL,
	due_at      INTEGER NOT NULL,
	manual      INTEGER NOT NULL DEFAULT 0 CHECK (manual IN (0, 1)),
	owner       TEXT    NOT NULL,
	claimed_at  INTEGER NOT NULL,
	thread_id   TEXT    NOT NULL,
	run_id      TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	error       TEXT    NOT NULL DEFAULT '',
	ended_at    INTEGER,
	PRIMARY KEY (tenant, schedule_id, due_at)
) STRICT, WITHOUT ROWID;

CREATE INDEX schedules_due ON schedules (next_at) WHERE next_at IS NOT NULL AND enabled;
