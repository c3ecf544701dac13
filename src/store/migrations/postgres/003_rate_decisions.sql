-- Governed rate decisions and their hash-chained audit trail.

CREATE TABLE rate_decisions (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  status TEXT NOT NULL CHECK (status IN ('pending', 'published', 'rejected', 'failed', 'reverted')),
  room_type_code TEXT NOT NULL,
  date_from TEXT NOT NULL,
  date_to TEXT NOT NULL,
  currency TEXT NOT NULL,
  minor_units BIGINT NOT NULL,
  brand_ceiling_id TEXT NOT NULL,
  approver_saml_subject TEXT NOT NULL,
  justification TEXT NOT NULL,
  proposer TEXT NOT NULL,
  properties TEXT NOT NULL,
  receipts TEXT NOT NULL DEFAULT '[]',
  failure TEXT,
  revert_reason TEXT,
  revert_approver TEXT,
  reverted_at BIGINT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX rate_decisions_by_portfolio ON rate_decisions (portfolio_id, id);

-- Append-only: the database itself refuses to change or remove an entry.
CREATE TABLE audit_entries (
  decision_id TEXT NOT NULL REFERENCES rate_decisions (id),
  seq BIGINT NOT NULL,
  at BIGINT NOT NULL,
  kind TEXT NOT NULL,
  actor TEXT NOT NULL,
  details TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL,
  PRIMARY KEY (decision_id, seq)
);
-- A refusal raises integrity_constraint_violation (SQLSTATE 23000), which
-- the store maps to STORE_CONSTRAINT as SQLite's RAISE(ABORT) is.
CREATE FUNCTION audit_entries_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit entries are immutable' USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
CREATE TRIGGER audit_entries_no_update BEFORE UPDATE ON audit_entries
  FOR EACH ROW EXECUTE FUNCTION audit_entries_immutable();
CREATE TRIGGER audit_entries_no_delete BEFORE DELETE ON audit_entries
  FOR EACH ROW EXECUTE FUNCTION audit_entries_immutable();
-- TRUNCATE fires no row trigger: refuse it as a statement.
CREATE TRIGGER audit_entries_no_truncate BEFORE TRUNCATE ON audit_entries
  FOR EACH STATEMENT EXECUTE FUNCTION audit_entries_immutable();
