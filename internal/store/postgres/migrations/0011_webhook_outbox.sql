-- The webhook outbox: one row per notice and endpoint, written in the
-- transaction of the fact it reports; a dispatcher leases due rows, attempts
-- them and records the outcome.
CREATE TABLE webhook_outbox (
    id           text NOT NULL,
    endpoint     text NOT NULL,
    tenant       text NOT NULL,
    type         text NOT NULL,
    data         json NOT NULL,
    created_at   timestamptz NOT NULL,
    status       text NOT NULL DEFAULT 'pending',
    attempts     integer NOT NULL DEFAULT 0,
    next_at      timestamptz NOT NULL,
    lease_owner  text NOT NULL DEFAULT '',
    lease_until  timestamptz,
    last_status  integer NOT NULL DEFAULT 0,
    last_error   text NOT NULL DEFAULT '',
    delivered_at timestamptz,
    PRIMARY KEY (id, endpoint)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at) WHERE status = 'pending';
CREATE INDEX webhook_outbox_tenant ON webhook_outbox (tenant, created_at);
