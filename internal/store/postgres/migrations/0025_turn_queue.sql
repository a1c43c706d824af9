-- Follow-up messages that wait for a thread's running turn to end (the
-- multitask strategy 'enqueue'), in order (seq). id is the run id each
-- will run under; json holds its turn's input, a versioned record (v).
-- turn_key and turn_digest identify the request, so a retry of a queued
-- request finds its row instead of queueing the message twice. A turn
-- that starts one deletes its row in the transaction that begins it.
CREATE TABLE turn_queue (
	tenant      text    NOT NULL,
	thread_id   text    NOT NULL,
	seq         bigint  NOT NULL,
	id          text    NOT NULL,
	turn_key    text    NOT NULL DEFAULT '',
	turn_digest text    NOT NULL DEFAULT '',
	v           integer NOT NULL,
	json        json    NOT NULL,
	created_at  timestamptz NOT NULL,
	PRIMARY KEY (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

CREATE UNIQUE INDEX turn_queue_id ON turn_queue (tenant, thread_id, id);
