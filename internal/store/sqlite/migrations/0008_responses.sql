-- Responses of the Responses wire (POST /v1/responses with store: true): a
-- turn of a durable thread, from its first stored event (seq) on. The
-- output is read from the thread's events; the row keeps where the turn
-- begins and the wire's record of the request. deleted hides a row from
-- reads but keeps it as its neighbours' bound.
CREATE TABLE responses (
	tenant      TEXT    NOT NULL,
	id          TEXT    NOT NULL,
	thread_id   TEXT    NOT NULL,
	seq         INTEGER NOT NULL,
	previous_id TEXT    NOT NULL DEFAULT '',
	background  INTEGER NOT NULL DEFAULT 0,
	cancelled   INTEGER NOT NULL DEFAULT 0,
	deleted     INTEGER NOT NULL DEFAULT 0,
	request     TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	PRIMARY KEY (tenant, id),
	UNIQUE (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- A message by its id, for a Responses client's item_reference.
CREATE INDEX messages_id ON messages (tenant, json_extract(json, '$.id'));
