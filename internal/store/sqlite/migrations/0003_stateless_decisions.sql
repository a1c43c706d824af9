-- Decisions of stateless turns: an approval-gated call that ran (or was
-- refused) in a turn without a session is kept in the decisions audit with
-- an empty thread_id, so an interrupt no longer needs a thread row. SQLite
-- cannot drop a foreign key in place: the table is rebuilt without it.

CREATE TABLE interrupts_new (
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
	decision        TEXT
) STRICT;

INSERT INTO interrupts_new (id, tenant, thread_id, run_id, agent, tool_call_id, tool, v, args, description, allowed,
	response_schema, subagent, status, created_at, decision)
SELECT id, tenant, thread_id, run_id, agent, tool_call_id, tool, v, args, description, allowed,
	response_schema, subagent, status, created_at, decision FROM interrupts;

DROP TABLE interrupts;
ALTER TABLE interrupts_new RENAME TO interrupts;

CREATE INDEX interrupts_tenant_status_created ON interrupts (tenant, status, created_at);
CREATE INDEX interrupts_thread_status ON interrupts (tenant, thread_id, status);
CREATE INDEX interrupts_thread_call ON interrupts (tenant, thread_id, tool_call_id);
