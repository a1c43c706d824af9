-- The options of a thread's last turn (client system prompt, client tools,
-- limits), kept so a resumed run continues the turn as the client asked.
ALTER TABLE threads ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
