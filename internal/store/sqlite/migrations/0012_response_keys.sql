-- How the Responses wire finds the first attempt of a request that names no
-- conversation: key is a digest of the client's Idempotency-Key ("key:…") or
-- of the request ("req:…"), digest the request's, thread_id the thread the
-- first attempt started. One row per (tenant, key): a conditional write
-- decides which of concurrent attempts starts the thread. Rows past
-- expires_at whose thread no longer runs are swept.
CREATE TABLE response_keys (
	tenant     TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	digest     TEXT    NOT NULL,
	thread_id  TEXT    NOT NULL CHECK (thread_id <> ''),
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX response_keys_expires ON response_keys (expires_at);
