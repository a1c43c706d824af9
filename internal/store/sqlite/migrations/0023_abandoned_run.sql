-- The run whose client went away before its end (a Stop, a closed tab, a
-- dropped connection): a new message on the thread then stops that run and
-- goes on at once, instead of waiting for it; a retry that attaches to it
-- clears it again.
ALTER TABLE run_control ADD COLUMN abandoned_run TEXT NOT NULL DEFAULT '';
