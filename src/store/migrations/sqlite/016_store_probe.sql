-- One row that store_probe_write rewrites while the database's disk is
-- full (issue 19), to learn when there is room again.
CREATE TABLE IF NOT EXISTS store_probe (
  id INTEGER PRIMARY KEY,
  at INTEGER NOT NULL
);
