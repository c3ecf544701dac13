-- Platform tables: portfolios and their properties and brand ceilings, OAuth
-- clients and tokens, SCIM tokens, users, the transactional outbox,
-- idempotency records, the deprecation registry and server keys.
-- Times are INTEGER Unix milliseconds; dates TEXT YYYY-MM-DD; JSON as TEXT.

CREATE TABLE portfolios (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  plan TEXT NOT NULL CHECK (plan IN ('chain_starter', 'group', 'enterprise')),
  audit_stream_target TEXT,
  rate_limit_per_minute INTEGER CHECK (rate_limit_per_minute IS NULL OR rate_limit_per_minute > 0),
  created_at INTEGER NOT NULL
);

CREATE TABLE properties (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  name TEXT NOT NULL,
  brand TEXT NOT NULL,
  pms_property_code TEXT NOT NULL,
  billing_id TEXT NOT NULL,
  timezone TEXT NOT NULL,
  currency TEXT NOT NULL,
  vat_entity_nip TEXT,
  created_at INTEGER NOT NULL,
  UNIQUE (portfolio_id, pms_property_code)
);
CREATE INDEX properties_by_portfolio ON properties (portfolio_id, id);

CREATE TABLE brand_ceilings (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  brand TEXT NOT NULL,
  currency TEXT NOT NULL,
  max_minor_units INTEGER NOT NULL CHECK (max_minor_units > 0),
  room_type_codes TEXT NOT NULL DEFAULT '[]',
  valid_from TEXT NOT NULL,
  valid_to TEXT,
  created_at INTEGER NOT NULL
);
CREATE INDEX brand_ceilings_by_portfolio ON brand_ceilings (portfolio_id, id);

CREATE TABLE oauth_clients (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  name TEXT NOT NULL,
  secret_hash TEXT NOT NULL,
  scopes TEXT NOT NULL,
  property_codes TEXT,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);

CREATE TABLE users (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  user_name TEXT NOT NULL,
  user_name_lower TEXT NOT NULL,
  display_name TEXT,
  external_id TEXT,
  active INTEGER NOT NULL DEFAULT 1,
  roles TEXT NOT NULL DEFAULT '[]',
  scim TEXT NOT NULL DEFAULT '{}',
  version INTEGER NOT NULL DEFAULT 1,
  via TEXT NOT NULL DEFAULT 'admin',
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (portfolio_id, user_name_lower)
);

CREATE TABLE access_tokens (
  token_hash TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  client_id TEXT,
  user_id TEXT,
  scopes TEXT NOT NULL,
  property_ids TEXT,
  property_codes TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  revoked_at INTEGER,
  created_at INTEGER NOT NULL
);
CREATE INDEX access_tokens_by_user ON access_tokens (user_id);
CREATE INDEX access_tokens_by_expiry ON access_tokens (expires_at);

CREATE TABLE scim_tokens (
  token_hash TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);

CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  surface TEXT NOT NULL CHECK (surface IN ('v1', 'v2')),
  type TEXT NOT NULL,
  portfolio_id TEXT NOT NULL,
  property_ids TEXT NOT NULL,
  data TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

CREATE TABLE idempotency_keys (
  portfolio_id TEXT NOT NULL,
  principal_id TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('in_flight', 'done')),
  status INTEGER,
  headers TEXT,
  body BLOB,
  locked_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (portfolio_id, principal_id, idem_key)
);
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);

CREATE TABLE deprecations (
  method TEXT NOT NULL,
  route TEXT NOT NULL,
  announced_at INTEGER NOT NULL,
  note TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  PRIMARY KEY (method, route)
);

CREATE TABLE server_keys (
  name TEXT PRIMARY KEY,
  secret BLOB NOT NULL,
  created_at INTEGER NOT NULL
);
