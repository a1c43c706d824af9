-- The shared state as it was along a thread's conversation: a row each time
-- a run's write replaced it, at the message sequence number the thread had
-- reached then (after the write's messages), on the branch it was on. A
-- branch from message X starts from the latest version at or before X on
-- X's path. A thread from before this migration gets its state as of now,
-- at its last message; a branch from earlier than that starts from {}.
CREATE TABLE state_versions (
	tenant    text NOT NULL,
	thread_id text NOT NULL,
	branch    bigint NOT NULL,
	seq       bigint NOT NULL,
	v         bigint NOT NULL,
	json      json NOT NULL,
	PRIMARY KEY (tenant, thread_id, branch, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

INSERT INTO state_versions (tenant, thread_id, branch, seq, v, json)
	SELECT tenant, id, 0, message_seq, v, state FROM threads WHERE state::text <> '{}';
