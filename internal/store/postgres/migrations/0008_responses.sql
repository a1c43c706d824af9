-- The stored responses of the Responses wire (POST /v1/responses with
-- store: true). A response is a turn of a durable thread that begins at seq,
-- the sequence number of the turn's first stored event; its output is read
-- from the thread's events up to the next response's seq. request is the
-- wire's own record of the request (JSON, opaque to the store). A deleted
-- response keeps its row (deleted) so its neighbours keep their bounds.
CREATE TABLE responses (
	tenant      text        NOT NULL,
	id          text        NOT NULL,
	thread_id   text        NOT NULL,
	seq         bigint      NOT NULL CHECK (seq > 0),
	previous_id text        NOT NULL DEFAULT '',
	background  boolean     NOT NULL DEFAULT false,
	cancelled   boolean     NOT NULL DEFAULT false,
	deleted     boolean     NOT NULL DEFAULT false,
	request     json        NOT NULL DEFAULT '{}',
	created_at  timestamptz NOT NULL,
	PRIMARY KEY (tenant, id),
	UNIQUE (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

-- A message by its id, for a Responses client's item_reference. The id is
-- read from the stored text (a message's JSON begins with its id), not
-- parsed as JSON: json->>'id' fails on a message holding \u0000.
CREATE INDEX messages_id ON messages (tenant, (substring(json::text from '^\{"id":"([^"\\]*)"')));
