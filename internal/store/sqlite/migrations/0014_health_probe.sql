-- One row /healthz rewrites (Store.ProbeWrite) to learn whether the
-- database takes writes when no other write said so lately.
CREATE TABLE health_probe (
    id        INTEGER PRIMARY KEY,
    probed_at INTEGER NOT NULL
);
