-- Nothing changes on SQLite. postgres/010_audit_reference.sql drops the
-- foreign key of audit_entries.decision_id, whose per-row check through
-- PostgreSQL's executor cost a fifth of its work per rate decision;
-- SQLite's check is one in-process index probe, and stays.
SELECT 1;
