-- The end user a decision belongs to: its thread's owner, or, for the
-- record of an approval-gated call in a stateless turn (no thread), the
-- turn's end user (the sub of its access token); '' for the tenant's (a
-- key's). Other users of the tenant do not see a decision of no thread
-- with an owner, unless admin or approver.
ALTER TABLE interrupts ADD COLUMN owner text NOT NULL DEFAULT '';
