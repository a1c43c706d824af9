-- Signed-out Studio sessions. A session id stays refused until expires_at,
-- when its cookie would have expired anyway; rows past it are deleted
-- whenever another session is revoked.
CREATE TABLE studio_revoked_sessions (
	tenant     text        NOT NULL,
	id         text        NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, id)
);

CREATE INDEX studio_revoked_sessions_expires ON studio_revoked_sessions (expires_at);
