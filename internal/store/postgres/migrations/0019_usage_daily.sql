-- The tokens and cost of model calls summed per UTC day, tenant, agent, key
-- label and model, kept with the steps they sum (the same transaction adds
-- a step's row and its share here): budgets read a period's spending from
-- at most a few rows a day instead of every step. cost_nanos sums the
-- priced calls; unpriced counts the others.
CREATE TABLE usage_daily (
	tenant           text NOT NULL,
	day              text NOT NULL,
	agent            text NOT NULL,
	key_label        text NOT NULL,
	provider         text NOT NULL,
	model            text NOT NULL,
	input_tokens     bigint NOT NULL DEFAULT 0,
	output_tokens    bigint NOT NULL DEFAULT 0,
	cached_tokens    bigint NOT NULL DEFAULT 0,
	reasoning_tokens bigint NOT NULL DEFAULT 0,
	cost_nanos       bigint NOT NULL DEFAULT 0,
	unpriced         bigint NOT NULL DEFAULT 0,
	calls            bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, day, agent, key_label, provider, model)
);
