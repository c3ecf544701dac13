-- Governed rate decisions and their hash-chained audit trail.

CREATE TABLE rate_decisions (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  status TEXT NOT NULL CHECK (status IN ('pending', 'published', 'rejected', 'failed', 'reverted')),
  room_type_code TEXT NOT NULL,
  date_from TEXT NOT NULL,
  date_to TEXT NOT NULL,
  currency TEXT NOT NULL,
  minor_units INTEGER NOT NULL,
  brand_ceiling_id TEXT NOT NULL,
  approver_saml_subject TEXT NOT NULL,
  justification TEXT NOT NULL,
  proposer TEXT NOT NULL,
  properties TEXT NOT NULL,
  receipts TEXT NOT NULL DEFAULT '[]',
  failure TEXT,
  revert_reason TEXT,
  revert_approver TEXT,
  reverted_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX rate_decisions_by_portfolio ON rate_decisions (portfolio_id, id);

-- Append-only: the database itself refuses to change or remove an entry.
CREATE TABLE audit_entries (
  decision_id TEXT NOT NULL REFERENCES rate_decisions (id),
  seq INTEGER NOT NULL,
  at INTEGER NOT NULL,
  kind TEXT NOT NULL,
  actor TEXT NOT NULL,
  details TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL,
  PRIMARY KEY (decision_id, seq)
);
CREATE TRIGGER audit_entries_no_update BEFORE UPDATE ON audit_entries
BEGIN
  SELECT RAISE(ABORT, 'audit entries are immutable');
END;
CREATE TRIGGER audit_entries_no_delete BEFORE DELETE ON audit_entries
BEGIN
  SELECT RAISE(ABORT, 'audit entries are immutable');
END;
