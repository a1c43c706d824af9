-- Follow-up messages that wait for a thread's running turn to end (the
-- multitask strategy 'enqueue'), in order (seq). id is the run id each
-- will run under; json holds its turn's input, a versioned record (v).
-- turn_key and turn_digest identify the request, so a retry of a queued
-- request finds its row instead of queueing the message twice. A turn
-- that starts one deletes its row in the transaction that begins it.
CREATE TABLE turn_queue (
	tenant      TEXT    NOT NULL,
	thread_id   TEXT    NOT NULL,
	seq         INTEGER NOT NULL,
	id          TEXT    NOT NULL,
	turn_key    TEXT    NOT NULL DEFAULT '',
	turn_digest TEXT    NOT NULL DEFAULT '',
	v           INTEGER NOT NULL,
	json        TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	PRIMARY KEY (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

CREATE UNIQUE INDEX turn_queue_id ON turn_queue (tenant, thread_id, id);
