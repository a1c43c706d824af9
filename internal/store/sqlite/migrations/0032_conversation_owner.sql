-- The end user a conversation created with POST /v1/conversations belongs
-- to before its first turn makes its thread (the sub of the caller who
-- created it; '' for a key's): other callers of the tenant do not see it,
-- unless admin, as for threads.owner.
ALTER TABLE conversations ADD COLUMN owner TEXT NOT NULL DEFAULT '';
