-- The Conversations API: a conversation's metadata and deleted mark (its id
-- is its thread's id; the thread comes with its first response), and the
-- items a client added outside a turn, in order (seq), until a turn takes
-- them as input.
CREATE TABLE conversations (
	tenant     TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	metadata   TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	deleted    INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, id)
) STRICT, WITHOUT ROWID;

CREATE TABLE conversation_items (
	seq             INTEGER PRIMARY KEY,
	tenant          TEXT    NOT NULL,
	conversation_id TEXT    NOT NULL,
	item_id         TEXT    NOT NULL,
	item            TEXT    NOT NULL
) STRICT;

CREATE INDEX conversation_items_by_conversation ON conversation_items (tenant, conversation_id, seq);
