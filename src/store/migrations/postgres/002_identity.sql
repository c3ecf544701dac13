-- Identity: SCIM groups, trusted SAML identity providers, and the ids of
-- assertions already used (one-time use).

CREATE TABLE scim_groups (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  display_name TEXT NOT NULL,
  external_id TEXT,
  scim TEXT NOT NULL DEFAULT '{}',
  version BIGINT NOT NULL DEFAULT 1,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX scim_groups_by_portfolio ON scim_groups (portfolio_id, id);

CREATE TABLE identity_providers (
  portfolio_id TEXT PRIMARY KEY REFERENCES portfolios (id),
  entity_id TEXT NOT NULL,
  cert_pem TEXT NOT NULL,
  roles_attribute TEXT NOT NULL DEFAULT 'roles',
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE saml_assertions_used (
  portfolio_id TEXT NOT NULL,
  assertion_id TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  PRIMARY KEY (portfolio_id, assertion_id)
);
CREATE INDEX saml_assertions_used_by_expiry ON saml_assertions_used (expires_at);
