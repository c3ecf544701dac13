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
  episode INTEGER NOT NULL,
  step INTEGER NOT NULL,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  due_at INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'fired', 'cancelled')),
  fired_at INTEGER,
  created_at INTEGER NOT NULL,
  UNIQUE (kind, subject_id, episode, step)
);
CREATE INDEX IF NOT EXISTS timers_due ON timers (due_at) WHERE state = 'pending';

-- Minutes of each SLA tier, per portfolio; a tier not set uses the
-- built-in defaults (docs/operations-tasks.md).
CREATE TABLE IF NOT EXISTS sla_tier_settings (
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  tier TEXT NOT NULL CHECK (tier IN ('standard', 'gold', 'platinum')),
  task_ack_minutes INTEGER NOT NULL CHECK (task_ack_minutes BETWEEN 1 AND 10080),
  task_escalate_minutes INTEGER NOT NULL CHECK (task_escalate_minutes BETWEEN 1 AND 10080),
  guest_reply_minutes INTEGER NOT NULL CHECK (guest_reply_minutes BETWEEN 1 AND 10080),
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (portfolio_id, tier)
);

-- The on-call rota of a portfolio: the document revopsctl oncall set
-- checked, kept whole.
CREATE TABLE IF NOT EXISTS oncall_rotas (
  portfolio_id TEXT PRIMARY KEY REFERENCES portfolios (id),
  document TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS operations_tasks (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  property_id TEXT NOT NULL REFERENCES properties (id),
  title TEXT NOT NULL,
  category TEXT NOT NULL,
  priority TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
  sla_tier TEXT NOT NULL CHECK (sla_tier IN ('standard', 'gold', 'platinum')),
  due_at INTEGER,
  status TEXT NOT NULL CHECK (status IN ('open', 'acknowledged', 'resolved')),
  ack_deadline INTEGER NOT NULL,
  escalate_every_ms INTEGER NOT NULL,
  escalation_level INTEGER NOT NULL DEFAULT 0,
  escalations TEXT NOT NULL DEFAULT '[]',
  created_by TEXT NOT NULL,
  acknowledged_by TEXT,
  acknowledged_at INTEGER,
  resolved_by TEXT,
  resolved_at INTEGER,
  resolution TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS operations_tasks_by_portfolio ON operations_tasks (portfolio_id, id);
