-- A per-thread sequence number for webhook notices: each notice of a
-- thread carries the next one (data.seq), so a receiver can order them.
ALTER TABLE threads ADD COLUMN notice_seq INTEGER NOT NULL DEFAULT 0;
