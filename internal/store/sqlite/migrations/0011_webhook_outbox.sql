-- The webhook outbox: one row per notice and endpoint, written in the
-- transaction of the fact it reports; a dispatcher leases due rows, attempts
-- them and records the outcome.
CREATE TABLE webhook_outbox (
    id           TEXT NOT NULL,
    endpoint     TEXT NOT NULL,
    tenant       TEXT NOT NULL,
    type         TEXT NOT NULL,
    data         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    status       TEXT NOT NULL DEFAULT 'pending',
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      INTEGER NOT NULL,
    lease_owner  TEXT NOT NULL DEFAULT '',
    lease_until  INTEGER,
    last_status  INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT NOT NULL DEFAULT '',
    delivered_at INTEGER,
    PRIMARY KEY (id, endpoint)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at) WHERE status = 'pending';
CREATE INDEX webhook_outbox_tenant ON webhook_outbox (tenant, created_at);
