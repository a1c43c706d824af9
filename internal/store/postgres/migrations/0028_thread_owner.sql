-- The end user a thread belongs to: the sub of the access token that
-- created it ('' for a thread of the tenant: a key's, a schedule's). Other
-- callers of the tenant do not see a thread with an owner, unless admin.
ALTER TABLE threads ADD COLUMN owner text NOT NULL DEFAULT '';
