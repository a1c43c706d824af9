-- One row /healthz rewrites (Store.ProbeWrite) to learn whether the
-- database takes writes when no other write said so lately; every replica
-- rewrites the same row.
CREATE TABLE health_probe (
    id        integer PRIMARY KEY,
    probed_at timestamptz NOT NULL
);
