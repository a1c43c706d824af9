-- Threads that branch. A branch grows from message fork_seq of branch
-- parent; branch 0 is a thread's first line, which every thread that never
-- branched is (so no existing row changes). Messages keep one sequence per
-- thread and say which branch they are on; a thread's head_branch is where
-- new turns go, branch_seq the last branch id given. A conversation is the
-- head's messages, then its parent's up to the fork, and so on.
CREATE TABLE branches (
	tenant     text  NOT NULL,
	thread_id  text  NOT NULL,
	id         bigint NOT NULL,
	parent     bigint NOT NULL,
	fork_seq   bigint NOT NULL,
	created_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, thread_id, id),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

ALTER TABLE messages ADD COLUMN branch bigint NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN head_branch bigint NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN branch_seq bigint NOT NULL DEFAULT 0;
