-- Decisions of stateless turns: an approval-gated call that ran (or was
-- refused) in a turn without a session is kept in the decisions audit with
-- an empty thread_id, so an interrupt no longer needs a thread row.
ALTER TABLE interrupts DROP CONSTRAINT IF EXISTS interrupts_tenant_thread_id_fkey;
