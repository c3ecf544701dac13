-- Webhook deliveries: one row per (event, subscription target), the exact
-- body sent on every attempt, its state and schedule, and an attempt log.
-- next_attempt_at is NULL once a delivery is final (delivered or
-- dead-lettered); while an attempt is in flight it is pushed to the lease's
-- end and leased_until is set, so a crashed attempt becomes due again.

CREATE TABLE webhook_deliveries (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  portfolio_id TEXT NOT NULL,
  subscription_id TEXT NOT NULL,
  surface TEXT NOT NULL CHECK (surface IN ('v1', 'v2')),
  target TEXT NOT NULL CHECK (target IN ('primary', 'mirror')),
  primary_id TEXT,
  event_id TEXT NOT NULL,
  event_type TEXT NOT NULL,
  event_created_at INTEGER NOT NULL,
  url TEXT NOT NULL,
  lane TEXT NOT NULL,
  rate_per_s INTEGER NOT NULL,
  body BLOB NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'retry_scheduled', 'delivered', 'dead_lettered')),
  attempt_count INTEGER NOT NULL DEFAULT 0,
  schedule_origin INTEGER,
  next_attempt_at INTEGER,
  leased_until INTEGER,
  manual INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  delivered_at INTEGER,
  dead_lettered_at INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (lane, next_attempt_at)
  WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_by_subscription ON webhook_deliveries (subscription_id, seq);
CREATE INDEX webhook_deliveries_dead ON webhook_deliveries (portfolio_id, seq)
  WHERE state = 'dead_lettered';
CREATE INDEX webhook_deliveries_sla ON webhook_deliveries (portfolio_id, event_created_at)
  WHERE target = 'primary' AND surface = 'v2';
-- No index on leased_until: only start-up recovery looks for leases (one
-- scan), while every attempt would pay to maintain it twice.

CREATE TABLE webhook_attempts (
  delivery_id TEXT NOT NULL,
  n INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL,
  http_status INTEGER,
  error TEXT,
  response_snippet TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (delivery_id, n)
) WITHOUT ROWID;

-- The fan-out cursor: the last outbox event turned into deliveries. Events
-- older than this migration are not delivered (no subscriber could have
-- expected them: delivery did not exist).
CREATE TABLE webhook_dispatch (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  last_event_seq INTEGER NOT NULL
);
INSERT INTO webhook_dispatch (id, last_event_seq) SELECT 1, COALESCE(MAX(seq), 0) FROM events;
