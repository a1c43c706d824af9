-- Threads, their messages and event logs, and interrupts.
-- Times are Unix microseconds (UTC). JSON columns hold text; the v column of
-- a row is the store.FormatVersion its JSON was written in.

CREATE TABLE threads (
	tenant      TEXT    NOT NULL,
	id          TEXT    NOT NULL,
	agent       TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	run_id      TEXT    NOT NULL DEFAULT '',
	v           INTEGER NOT NULL DEFAULT 1,
	state       TEXT    NOT NULL DEFAULT '{}',
	last_error  TEXT    NOT NULL DEFAULT '',
	lease_owner TEXT    NOT NULL DEFAULT '',
	lease_until INTEGER,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	-- the last seq given to a message and to an event of the thread
	message_seq INTEGER NOT NULL DEFAULT 0,
	event_seq   INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, id)
) STRICT, WITHOUT ROWID;

CREATE INDEX threads_tenant_updated ON threads (tenant, updated_at);
CREATE INDEX threads_status_updated ON threads (status, updated_at);

CREATE TABLE messages (
	tenant    TEXT    NOT NULL,
	thread_id TEXT    NOT NULL,
	seq       INTEGER NOT NULL,
	v         INTEGER NOT NULL,
	json      TEXT    NOT NULL,
	PRIMARY KEY (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

CREATE TABLE events (
	tenant    TEXT    NOT NULL,
	thread_id TEXT    NOT NULL,
	seq       INTEGER NOT NULL,
	v         INTEGER NOT NULL,
	json      TEXT    NOT NULL,
	PRIMARY KEY (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

CREATE TABLE interrupts (
	id              TEXT    NOT NULL PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	thread_id       TEXT    NOT NULL,
	run_id          TEXT    NOT NULL,
	agent           TEXT    NOT NULL,
	tool_call_id    TEXT    NOT NULL,
	tool            TEXT    NOT NULL,
	v               INTEGER NOT NULL,
	args            TEXT    NOT NULL,
	description     TEXT,
	allowed         TEXT    NOT NULL,
	response_schema TEXT,
	subagent        TEXT    NOT NULL DEFAULT '',
	status          TEXT    NOT NULL,
	created_at      INTEGER NOT NULL,
	decision        TEXT,
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) STRICT;

CREATE INDEX interrupts_tenant_status_created ON interrupts (tenant, status, created_at);
CREATE INDEX interrupts_thread_status ON interrupts (tenant, thread_id, status);
CREATE INDEX interrupts_thread_call ON interrupts (tenant, thread_id, tool_call_id);
