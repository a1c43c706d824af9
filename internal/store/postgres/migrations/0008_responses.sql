-- Responses of the Responses wire (POST /v1/responses with store: true): a
-- turn of a durable thread, from its first stored event (seq) on. The
-- output is read from the thread's events; the row keeps where the turn
-- begins and the wire's record of the request. deleted hides a row from
-- reads but keeps it as its neighbours' bound.
CREATE TABLE responses (
	tenant      text        NOT NULL,
	id          text        NOT NULL,
	thread_id   text        NOT NULL,
	seq         bigint      NOT NULL,
	previous_id text        NOT NULL DEFAULT '',
	background  boolean     NOT NULL DEFAULT false,
	cancelled   boolean     NOT NULL DEFAULT false,
	deleted     boolean     NOT NULL DEFAULT false,
	request     json        NOT NULL,
	created_at  timestamptz NOT NULL,
	PRIMARY KEY (tenant, id),
	UNIQUE (tenant, thread_id, seq),
	FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

-- A message by its id, for a Responses client's item_reference.
CREATE INDEX messages_id ON messages (tenant, (json->>'id'));
