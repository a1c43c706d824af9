-- Threads, their messages and event logs, and interrupts.
-- JSON columns use the json type: validated, but kept as written (jsonb
-- refuses the \u0000 escape a tool result may hold). The v column of a row
-- is the store.FormatVersion its JSON was written in.

CREATE TABLE threads (
	tenant      text        NOT NULL,
	id          text        NOT NULL,
	agent       text        NOT NULL,
	status      text        NOT NULL CHECK (status IN ('idle', 'running', 'waiting', 'queued', 'failed')),
	run_id      text        NOT NULL DEFAULT '',
	v           integer     NOT NULL DEFAULT 1,
	state       json        NOT NULL DEFAULT '{}',
	last_error  text        NOT NULL DEFAULT '',
	lease_owner text        NOT NULL DEFAULT '',
	lease_until timestamptz,
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL,
	-- the last seq given to a message and to an event of the thread
	message_seq bigint      NOT NULL DEFAULT 0,
	event_seq   bigint      NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, id)
);

CREATE INDEX threads_tenant_updated ON threads (tenant, updated_at DESC, id DESC);
CREATE INDEX threads_stale ON threads (updated_at, tenant, id) WHERE status IN ('queued', 'running');

CREATE TABLE messages (
	tenant    text    NOT NULL,
	thread_id text    NOT NULL,
	seq       bigint  NOT NULL,
	v         integer NOT NULL,
	json      json    NOT NULL,
	PRIMARY KEY (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

CREATE TABLE events (
	tenant    text    NOT NULL,
	thread_id text    NOT NULL,
	seq       bigint  NOT NULL,
	v         integer NOT NULL,
	json      json    NOT NULL,
	PRIMARY KEY (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

CREATE TABLE interrupts (
	id              text        NOT NULL PRIMARY KEY,
	tenant          text        NOT NULL,
	thread_id       text        NOT NULL,
	run_id          text        NOT NULL,
	agent           text        NOT NULL,
	tool_call_id    text        NOT NULL,
	tool            text        NOT NULL,
	v               integer     NOT NULL,
	args            json        NOT NULL,
	description     text,
	allowed         json        NOT NULL,
	response_schema json,
	subagent        text        NOT NULL DEFAULT '',
	status          text        NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
	created_at      timestamptz NOT NULL,
	decision        json,
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

CREATE INDEX interrupts_tenant_status_created ON interrupts (tenant, status, created_at DESC, id DESC);
CREATE INDEX interrupts_thread_status ON interrupts (tenant, thread_id, status);
CREATE INDEX interrupts_thread_call ON interrupts (tenant, thread_id, tool_call_id);
