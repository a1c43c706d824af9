-- Run control: what is asked of a thread's runs from outside them, stored so
-- that every replica can ask it and the one holding the run hears it. A
-- cancel request names the run it stops (cancel_run; the run holding the
-- thread when it was asked); waiting_seq is the pause (its terminal
-- event's sequence number) an MCP call answered "waiting on a human
-- decision" about, whose outcome the next call on the session reports.
CREATE TABLE run_control (
	tenant      TEXT    NOT NULL,
	thread_id   TEXT    NOT NULL,
	cancel_run  TEXT    NOT NULL DEFAULT '',
	cancel_at   INTEGER,
	waiting_seq INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, thread_id)
) STRICT, WITHOUT ROWID;
