-- Written to be applied again over itself, as 010 is.
--
-- Operations (issue 16): the durable scheduler's timers, the per-tier
-- SLA settings of a portfolio, its on-call rota and its operations tasks.

-- A timer fires once for (kind, subject, episode, step): the worker's
-- scheduler marks it fired in the transaction that acts on it, so several
-- workers never fire one twice; ending an episode cancels its timers in
-- the transaction that ends it.
CREATE TABLE IF NOT EXISTS timers (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  subject_id TEXT NOT NULL,
  episode BIGINT NOT NULL,
  step BIGINT NOT NULL,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  due_at BIGINT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'fired', 'cancelled')),
  fired_at BIGINT,
  created_at BIGINT NOT NULL,
  UNIQUE (kind, subject_id, episode, step)
);
CREATE INDEX IF NOT EXISTS timers_due ON timers (due_at) WHERE state = 'pending';

-- Minutes of each SLA tier, per portfolio; a tier not set uses the
-- built-in defaults (docs/operations-tasks.md).
CREATE TABLE IF NOT EXISTS sla_tier_settings (
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  tier TEXT NOT NULL CHECK (tier IN ('standard', 'gold', 'platinum')),
  task_ack_minutes BIGINT NOT NULL CHECK (task_ack_minutes BETWEEN 1 AND 10080),
  task_escalate_minutes BIGINT NOT NULL CHECK (task_escalate_minutes BETWEEN 1 AND 10080),
  guest_reply_minutes BIGINT NOT NULL CHECK (guest_reply_minutes BETWEEN 1 AND 10080),
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (portfolio_id, tier)
);

-- The on-call rota of a portfolio: the document revopsctl oncall set
-- checked, kept whole.
CREATE TABLE IF NOT EXISTS oncall_rotas (
  portfolio_id TEXT PRIMARY KEY REFERENCES portfolios (id),
  document TEXT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS operations_tasks (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  property_id TEXT NOT NULL REFERENCES properties (id),
  title TEXT NOT NULL,
  category TEXT NOT NULL,
  priority TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
  sla_tier TEXT NOT NULL CHECK (sla_tier IN ('standard', 'gold', 'platinum')),
  due_at BIGINT,
  status TEXT NOT NULL CHECK (status IN ('open', 'acknowledged', 'resolved')),
  ack_deadline BIGINT NOT NULL,
  escalate_every_ms BIGINT NOT NULL,
  escalation_level BIGINT NOT NULL DEFAULT 0,
  escalations TEXT NOT NULL DEFAULT '[]',
  created_by TEXT NOT NULL,
  acknowledged_by TEXT,
  acknowledged_at BIGINT,
  resolved_by TEXT,
  resolved_at BIGINT,
  resolution TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS operations_tasks_by_portfolio ON operations_tasks (portfolio_id, id);
