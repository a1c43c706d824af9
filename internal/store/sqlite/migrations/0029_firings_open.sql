-- Firings are kept, one row per schedule and due time, so the scans by
-- status (claimed firings left by a dead claimer; started or waiting
-- firings whose outcome is settled from their runs) use an index.
CREATE INDEX schedule_firings_status ON schedule_firings (status, claimed_at);
