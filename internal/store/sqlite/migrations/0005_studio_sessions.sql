-- Signed-out Studio sessions. A session id stays refused until expires_at
-- (Unix microseconds), when its cookie would have expired anyway; rows past
-- it are deleted whenever another session is revoked.
CREATE TABLE studio_revoked_sessions (
	tenant     TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, id)
) STRICT, WITHOUT ROWID;

CREATE INDEX studio_revoked_sessions_expires ON studio_revoked_sessions (expires_at);
