-- audit_entries.decision_id loses its foreign key on PostgreSQL.
--
-- The key's check ran, for every entry inserted, a lookup through the
-- executor that locked the decision row (FOR KEY SHARE): ~20 us of
-- postgres CPU per entry, and a decision writes nine entries, so about a
-- fifth of the database's work per rate decision (docs/BENCHMARKS.md;
-- checking once per statement from a trigger cost as much). Only
-- audit_trail.c writes entries, in the transaction that inserted the
-- decision or holds its chain, and `revopsctl audit verify` checks every
-- chain end to end.
--
-- What the key also did, refuse to delete (or re-key) a decision that has
-- entries, a row trigger on rate_decisions still does; revops itself never
-- deletes a decision. The events table never had a key either.
--
-- PostgreSQL only: SQLite checks a foreign key in-process with one index
-- probe, at a cost that does not show; sqlite/010_audit_reference.sql
-- changes nothing and keeps the numbering aligned. Written to be applied
-- again over itself (a test rewinds schema_migrations to replay upgrades).
ALTER TABLE audit_entries DROP CONSTRAINT IF EXISTS audit_entries_decision_id_fkey;

CREATE OR REPLACE FUNCTION rate_decisions_keep_audited() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM audit_entries WHERE decision_id = OLD.id) THEN
    RAISE EXCEPTION 'rate decision % has audit entries', OLD.id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END;
$$;
DROP TRIGGER IF EXISTS rate_decisions_audited ON rate_decisions;
CREATE TRIGGER rate_decisions_audited BEFORE DELETE OR UPDATE OF id ON rate_decisions
  FOR EACH ROW EXECUTE FUNCTION rate_decisions_keep_audited();
