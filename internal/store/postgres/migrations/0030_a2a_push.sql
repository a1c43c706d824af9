-- A2A push notification configs (CreateTaskPushNotificationConfig, or
-- SendMessage's configuration): where to POST a task's status updates. A
-- task is a turn of a thread, named by its first run (task_id); turn_seq is
-- the turn's first event (threads.turn_seq while it is the thread's turn),
-- which the transactions writing the turn's status events join on to queue
-- one webhook_outbox row per config (endpoint 'a2a:' || id). token and
-- auth_credentials are the client's secrets, sent with each notification.
CREATE TABLE a2a_push_configs (
	tenant           text        NOT NULL,
	id               text        NOT NULL,
	task_id          text        NOT NULL,
	thread_id        text        NOT NULL,
	turn_seq         bigint      NOT NULL,
	url              text        NOT NULL,
	token            text        NOT NULL DEFAULT '',
	auth_scheme      text        NOT NULL DEFAULT '',
	auth_credentials text        NOT NULL DEFAULT '',
	created_at       timestamptz NOT NULL,
	PRIMARY KEY (tenant, id)
);

CREATE INDEX a2a_push_configs_task ON a2a_push_configs (tenant, task_id, created_at);
CREATE INDEX a2a_push_configs_turn ON a2a_push_configs (tenant, thread_id, turn_seq);
