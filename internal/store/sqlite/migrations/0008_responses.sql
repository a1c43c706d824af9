-- The stored responses of the Responses wire (POST /v1/responses with
-- store: true). A response is a turn of a durable thread that begins at seq,
-- the sequence number of the turn's first stored event; its output is read
-- from the thread's events up to the next response's seq. request is the
-- wire's own record of the request (JSON, opaque to the store). A deleted
-- response keeps its row (deleted = 1) so its neighbours keep their bounds.
CREATE TABLE responses (
	tenant      TEXT    NOT NULL,
	id          TEXT    NOT NULL,
	thread_id   TEXT    NOT NULL,
	seq         INTEGER NOT NULL CHECK (seq > 0),
	previous_id TEXT    NOT NULL DEFAULT '',
	background  INTEGER NOT NULL DEFAULT 0 CHECK (background IN (0, 1)),
	cancelled   INTEGER NOT NULL DEFAULT 0 CHECK (cancelled IN (0, 1)),
	deleted     INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
	request     TEXT    NOT NULL DEFAULT '{}',
	created_at  INTEGER NOT NULL,
	PRIMARY KEY (tenant, id),
	UNIQUE (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- A message by its id, for a Responses client's item_reference.
CREATE INDEX messages_id ON messages (tenant, json_extract(json, '$.id'));
