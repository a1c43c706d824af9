-- The last turn a thread began, so a client's retry of it (the same
-- Idempotency-Key, or the same input within the retry window) attaches to
-- it instead of starting another: the sequence number of its first event
-- (0: none recorded), the digest of the client's Idempotency-Key ('' when
-- none) and the digest of its input.
ALTER TABLE threads ADD COLUMN turn_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN turn_key text NOT NULL DEFAULT '';
ALTER TABLE threads ADD COLUMN turn_digest text NOT NULL DEFAULT '';
