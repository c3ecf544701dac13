-- Webhook subscriptions and the portfolio signing secrets (v2). Secrets are
-- stored sealed (AES-256-GCM) with a key kept outside the database.

CREATE TABLE webhook_subscriptions (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  surface TEXT NOT NULL CHECK (surface IN ('v1', 'v2')),
  url TEXT NOT NULL,
  mirror_url TEXT,
  events TEXT NOT NULL,
  description TEXT,
  status TEXT NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'deleted')),
  secret_sealed TEXT,
  created_at BIGINT NOT NULL,
  deleted_at BIGINT
);
CREATE INDEX webhook_subscriptions_by_portfolio ON webhook_subscriptions (portfolio_id, id);

CREATE TABLE webhook_portfolio_secrets (
  portfolio_id TEXT PRIMARY KEY REFERENCES portfolios (id),
  secret_sealed TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  rotated_at BIGINT
);
