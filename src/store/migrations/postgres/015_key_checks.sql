-- The sealing key's check value (issue 19): which <data-dir>/revops.key
-- this database's sealed secrets need, recorded the first time a key is
-- used with it (cluster/sealkey.c). A process with another key, or none,
-- refuses to start instead of sealing under a key the others cannot open.
CREATE TABLE IF NOT EXISTS key_checks (
  name TEXT PRIMARY KEY,
  check_value TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
