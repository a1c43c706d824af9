-- The sequence number of the first message a thread's last turn appended
-- (its input, or for a turn with none its first answer): a new message that
-- rolls that turn back (multitask 'rollback') goes on from the message
-- before it, on a new branch.
ALTER TABLE threads ADD COLUMN turn_msg_seq INTEGER NOT NULL DEFAULT 0;
