-- The long-term memory store (ctx.store, /v1/store/items): JSON values by
-- tenant, namespace and key. namespace is the namespace's labels joined with
-- '.' (a label holds no '.'), so the items under a prefix P are namespace = P
-- or the range ['P.', 'P/'), which the primary key's index serves: the
-- column compares bytes (COLLATE "C") whatever the database's collation.
-- embedding is the value's unit-length embedding as little-endian float32s
-- (NULL: not indexed), dims its length. expires_at is when the item expires
-- (NULL: never); ttl_seconds the TTL it was put with, which a read with
-- refresh renews.
CREATE TABLE memory_items (
	tenant      text        NOT NULL,
	namespace   text        COLLATE "C" NOT NULL,
	key         text        NOT NULL,
	value       text        NOT NULL,
	embedding   bytea,
	dims        integer     NOT NULL DEFAULT 0,
	created_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL,
	expires_at  timestamptz,
	ttl_seconds bigint,
	PRIMARY KEY (tenant, namespace, key)
);

CREATE INDEX memory_items_expiry ON memory_items (expires_at) WHERE expires_at IS NOT NULL;
