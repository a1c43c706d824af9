-- The tokens and cost of model calls summed per UTC day, tenant, agent, key
-- label and model, kept with the steps they sum (the same transaction adds
-- a step's row and its share here): budgets read a period's spending from
-- at most a few rows a day instead of every step. cost_nanos sums the
-- priced calls; unpriced counts the others.
CREATE TABLE usage_daily (
	tenant           TEXT NOT NULL,
	day              TEXT NOT NULL,
	agent            TEXT NOT NULL,
	key_label        TEXT NOT NULL,
	provider         TEXT NOT NULL,
	model            TEXT NOT NULL,
	input_tokens     INTEGER NOT NULL DEFAULT 0,
	output_tokens    INTEGER NOT NULL DEFAULT 0,
	cached_tokens    INTEGER NOT NULL DEFAULT 0,
	reasoning_tokens INTEGER NOT NULL DEFAULT 0,
	cost_nanos       INTEGER NOT NULL DEFAULT 0,
	unpriced         INTEGER NOT NULL DEFAULT 0,
	calls            INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, day, agent, key_label, provider, model)
) STRICT, WITHOUT ROWID;
