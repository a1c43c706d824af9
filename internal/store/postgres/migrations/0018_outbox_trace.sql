-- The trace a webhook notice belongs to: the W3C traceparent of the span
-- whose transaction stored it (a run's, or the request that decided), so
-- its deliveries, later and on any replica, carry the run's trace on.
ALTER TABLE webhook_outbox ADD COLUMN traceparent text NOT NULL DEFAULT '';
