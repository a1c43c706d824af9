-- Where each turn ended, for a request that continues it later (the
-- Responses wire's previous_response_id naming an older response). A run
-- records the turn it belongs to (the thread's turn_seq, the event sequence
-- number of the turn's first event) and, at its end, the sequence number of
-- the last message of the conversation it ran on: the last run of a turn
-- says where the turn ended, on its own branch.
ALTER TABLE runs ADD COLUMN turn_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN end_seq INTEGER NOT NULL DEFAULT 0;
