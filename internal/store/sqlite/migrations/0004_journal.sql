-- The journal of stateless turns: the steps a turn without a session has
-- completed (its tool-call messages and tool results, as one JSON array, and
-- the state they left), kept until expires_at so a client retrying the turn
-- continues it instead of running its tools again. Rows past expires_at are
-- swept.
CREATE TABLE journal (
	tenant     TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	digest     TEXT    NOT NULL,
	v          INTEGER NOT NULL,
	messages   TEXT    NOT NULL,
	state      TEXT    NOT NULL DEFAULT '{}',
	updated_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX journal_expires ON journal (expires_at);
