-- The journal of stateless turns: the steps a turn without a session has
-- completed (its tool-call messages and tool results, as one JSON array, and
-- the state they left), kept until expires_at so a client retrying the turn
-- on any replica continues it instead of running its tools again. Rows past
-- expires_at are swept.
CREATE TABLE journal (
	tenant     text        NOT NULL,
	key        text        NOT NULL,
	digest     text        NOT NULL,
	v          integer     NOT NULL,
	messages   json        NOT NULL,
	state      json        NOT NULL DEFAULT '{}',
	updated_at timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, key)
);

CREATE INDEX journal_expires ON journal (expires_at);
