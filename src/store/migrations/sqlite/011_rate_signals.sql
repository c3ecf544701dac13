-- Written to be applied again over itself, as 010 is (a test rewinds
-- schema_migrations to replay upgrades).
--
-- Revenue signals (issue 15): rate suggestions from a revenue management
-- system with their own hash-chained trail, the approved rate floors that
-- published decisions and approved suggestions set, and OTA rate
-- observations with the parity alerts they open.

CREATE TABLE IF NOT EXISTS rate_suggestions (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  property_id TEXT NOT NULL REFERENCES properties (id),
  room_type_code TEXT NOT NULL,
  stay_date TEXT NOT NULL,
  currency TEXT NOT NULL,
  current_minor INTEGER NOT NULL,
  proposed_minor INTEGER NOT NULL,
  trigger_text TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK (status IN ('pending_approval', 'approved', 'rejected', 'expired')),
  decided_by TEXT,
  decided_at INTEGER,
  reason TEXT,
  booking_ref TEXT,
  booking_at TEXT,
  -- An approval holds the suggestion while it pushes to the booking engine.
  claim_until INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS rate_suggestions_by_portfolio ON rate_suggestions (portfolio_id, id);
CREATE INDEX IF NOT EXISTS rate_suggestions_pending ON rate_suggestions (status, stay_date);

-- Append-only, as audit_entries.
CREATE TABLE IF NOT EXISTS suggestion_audit_entries (
  suggestion_id TEXT NOT NULL REFERENCES rate_suggestions (id),
  seq INTEGER NOT NULL,
  at INTEGER NOT NULL,
  kind TEXT NOT NULL,
  actor TEXT NOT NULL,
  details TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL,
  PRIMARY KEY (suggestion_id, seq)
);
CREATE TRIGGER IF NOT EXISTS suggestion_audit_entries_no_update BEFORE UPDATE ON suggestion_audit_entries
BEGIN
  SELECT RAISE(ABORT, 'audit entries are immutable');
END;
CREATE TRIGGER IF NOT EXISTS suggestion_audit_entries_no_delete BEFORE DELETE ON suggestion_audit_entries
BEGIN
  SELECT RAISE(ABORT, 'audit entries are immutable');
END;

-- One row per property of a published decision (source rd_...) or
-- approved suggestion (rs_...); a revert withdraws its decision's rows.
CREATE TABLE IF NOT EXISTS rate_floors (
  source_id TEXT NOT NULL,
  property_id TEXT NOT NULL,
  room_type_code TEXT NOT NULL,
  date_from TEXT NOT NULL,
  date_to TEXT NOT NULL,
  currency TEXT NOT NULL,
  minor_units INTEGER NOT NULL,
  set_at INTEGER NOT NULL,
  withdrawn_at INTEGER,
  PRIMARY KEY (source_id, property_id)
);
CREATE INDEX IF NOT EXISTS rate_floors_lookup ON rate_floors (property_id, room_type_code, date_from);
INSERT INTO rate_floors
  SELECT d.id, j.value, d.room_type_code, d.date_from, d.date_to, d.currency, d.minor_units,
         d.updated_at, NULL
  FROM rate_decisions d, json_each(d.properties) j
  WHERE d.status = 'published'
  ON CONFLICT (source_id, property_id) DO NOTHING;

CREATE TABLE IF NOT EXISTS ota_observations (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  property_id TEXT NOT NULL REFERENCES properties (id),
  ota TEXT NOT NULL,
  room_type_code TEXT NOT NULL,
  stay_date TEXT NOT NULL,
  currency TEXT NOT NULL,
  minor_units INTEGER NOT NULL,
  observed_at INTEGER NOT NULL,
  received_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ota_observations_by_key
  ON ota_observations (property_id, room_type_code, stay_date, ota, observed_at);

CREATE TABLE IF NOT EXISTS parity_alerts (
  id TEXT PRIMARY KEY,
  portfolio_id TEXT NOT NULL REFERENCES portfolios (id),
  property_id TEXT NOT NULL REFERENCES properties (id),
  ota TEXT NOT NULL,
  room_type_code TEXT NOT NULL,
  stay_date TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('open', 'resolved')),
  currency TEXT NOT NULL,
  ota_minor INTEGER NOT NULL,
  floor_minor INTEGER NOT NULL,
  floor_source TEXT NOT NULL,
  opened_at INTEGER NOT NULL,
  observed_at INTEGER NOT NULL,
  resolved_at INTEGER,
  resolved_minor INTEGER,
  updated_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS parity_alerts_open
  ON parity_alerts (property_id, room_type_code, stay_date, ota) WHERE status = 'open';
CREATE INDEX IF NOT EXISTS parity_alerts_by_portfolio ON parity_alerts (portfolio_id, id);
