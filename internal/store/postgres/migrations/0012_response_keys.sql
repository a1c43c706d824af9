-- How the Responses wire finds the first attempt of a request that names no
-- conversation: key is a digest of the client's Idempotency-Key ("key:…") or
-- of the request ("req:…"), digest the request's, thread_id the thread the
-- first attempt started. One row per (tenant, key): a conditional write
-- decides which of concurrent attempts, on any replica, starts the thread.
-- Rows past expires_at whose thread no longer runs are swept.
CREATE TABLE response_keys (
	tenant     text        NOT NULL,
	key        text        NOT NULL,
	digest     text        NOT NULL,
	thread_id  text        NOT NULL CHECK (thread_id <> ''),
	created_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, key)
);

CREATE INDEX response_keys_expires ON response_keys (expires_at);
