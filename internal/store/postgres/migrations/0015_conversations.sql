-- The Conversations API: a conversation's metadata and deleted mark (its id
-- is its thread's id; the thread comes with its first response), and the
-- items a client added outside a turn, in order (seq), until a turn takes
-- them as input.
CREATE TABLE conversations (
	tenant     text        NOT NULL,
	id         text        NOT NULL,
	metadata   jsonb       NOT NULL,
	created_at timestamptz NOT NULL,
	deleted    boolean     NOT NULL DEFAULT false,
	PRIMARY KEY (tenant, id)
);

CREATE TABLE conversation_items (
	seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tenant          text   NOT NULL,
	conversation_id text   NOT NULL,
	item_id         text   NOT NULL,
	item            text   NOT NULL
);

CREATE INDEX conversation_items_by_conversation ON conversation_items (tenant, conversation_id, seq);
