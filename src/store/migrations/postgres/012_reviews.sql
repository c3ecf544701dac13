-- Written to be applied again over itself, as 010 is.
--
-- Reputation signals (issue 15): guest reviews with their drafted and
-- published replies, the portfolio's reply templates, reputation scores
-- kept as day buckets, per-brand floors and the alerts they open.

CREATE TABLE IF NOT EXISTS reviews (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  property_id TEXT NOT NULL REFERENCES properties (id),
  source TEXT NOT NULL,
  external_id TEXT NOT NULL,
  rating_x100 BIGINT NOT NULL,
  max_rating BIGINT NOT NULL,
  score_x100 BIGINT NOT NULL,
  language TEXT NOT NULL,
  text TEXT NOT NULL,
  author TEXT NOT NULL,
  published_at BIGINT NOT NULL,
  reply_status TEXT NOT NULL
    CHECK (reply_status IN ('none', 'drafted', 'publishing', 'published', 'failed')),
  reply_text TEXT,
  reply_band TEXT,
  reply_language TEXT,
  reply_edited BIGINT NOT NULL DEFAULT 0,
  reply_published_at BIGINT,
  publish_attempts BIGINT NOT NULL DEFAULT 0,
  next_attempt_at BIGINT,
  last_error TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  UNIQUE (portfolio_id, source, external_id)
);
CREATE INDEX IF NOT EXISTS reviews_by_portfolio ON reviews (portfolio_id, id);
CREATE INDEX IF NOT EXISTS reviews_publishing ON reviews (next_attempt_at) WHERE reply_status = 'publishing';

CREATE TABLE IF NOT EXISTS review_templates (
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  band TEXT NOT NULL CHECK (band IN ('low', 'mid', 'high')),
  language TEXT NOT NULL,
  text TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (portfolio_id, band, language)
);

-- The reviews of one property published on one UTC day: how many, and the
-- sum of their scores (hundredths of a point on the 0-10 scale).
CREATE TABLE IF NOT EXISTS reputation_days (
  portfolio_id TEXT NOT NULL,
  property_id TEXT NOT NULL,
  day BIGINT NOT NULL,
  reviews BIGINT NOT NULL,
  score_sum BIGINT NOT NULL,
  PRIMARY KEY (portfolio_id, property_id, day)
);

CREATE TABLE IF NOT EXISTS reputation_floors (
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  brand TEXT NOT NULL,
  min_score_x100 BIGINT NOT NULL CHECK (min_score_x100 BETWEEN 0 AND 1000),
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (portfolio_id, brand)
);

-- The last score computed per subject: scope 'portfolio' (subject ''),
-- 'brand' (the brand) or 'property' (its id); NULL while too few reviews.
CREATE TABLE IF NOT EXISTS reputation_scores (
  portfolio_id TEXT NOT NULL,
  scope TEXT NOT NULL,
  subject TEXT NOT NULL,
  score_x100 BIGINT,
  reviews BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (portfolio_id, scope, subject)
);

CREATE TABLE IF NOT EXISTS reputation_alerts (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  scope TEXT NOT NULL CHECK (scope IN ('brand', 'property')),
  subject TEXT NOT NULL,
  brand TEXT NOT NULL,
  property_id TEXT,
  status TEXT NOT NULL CHECK (status IN ('open', 'resolved')),
  threshold_x100 BIGINT NOT NULL,
  score_x100 BIGINT NOT NULL,
  previous_x100 BIGINT,
  current_x100 BIGINT NOT NULL,
  opened_at BIGINT NOT NULL,
  resolved_at BIGINT,
  updated_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS reputation_alerts_open
  ON reputation_alerts (portfolio_id, scope, subject) WHERE status = 'open';
CREATE INDEX IF NOT EXISTS reputation_alerts_by_portfolio ON reputation_alerts (portfolio_id, id);
