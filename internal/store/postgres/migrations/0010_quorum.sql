-- A quorum: how many approvals from distinct principals an interrupt needs
-- before its call runs, and the approvals so far (a JSON list of
-- {by, via, at, editedArgs?}; an edit resets it to just the edit).
ALTER TABLE interrupts ADD COLUMN approvals_needed integer NOT NULL DEFAULT 1;
ALTER TABLE interrupts ADD COLUMN approvals json NOT NULL DEFAULT '[]';
