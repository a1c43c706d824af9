-- When a pending interrupt expires (microseconds since the epoch; NULL:
-- never). An expired one is decided as a rejection with decidedVia
-- "expiry" by the recovery sweep, which lists them with this index.
ALTER TABLE interrupts ADD COLUMN expires_at INTEGER;
CREATE INDEX interrupts_pending_expiry ON interrupts (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
