-- Several revopsd nodes on one database (docs/operations.md): each running
-- process is a row of nodes, kept alive by its heartbeat; a row whose
-- heartbeat is older than the node time-to-live is a dead node, whose work
-- others take over. work_leases divides the webhook lanes between the
-- worker nodes: lane_hash % 64 names a bucket, and a lane is served only
-- by the node holding its bucket's unexpired lease (cluster.c).
--
-- The work a node leaves behind names it: a pending rate decision (the
-- node running its PMS writes) and a webhook claim (the node sending its
-- deliveries). NULL: made before this migration, by a process that is gone.
--
-- The PostgreSQL twin of sqlite/009_cluster.sql (generate_series for the
-- recursive count).
CREATE TABLE nodes (
  id TEXT PRIMARY KEY,
  role TEXT NOT NULL CHECK (role IN ('all', 'api', 'worker')),
  host TEXT NOT NULL,
  pid BIGINT NOT NULL,
  started_at BIGINT NOT NULL,
  heartbeat_at BIGINT NOT NULL
);

CREATE TABLE work_leases (
  bucket INTEGER PRIMARY KEY CHECK (bucket BETWEEN 0 AND 63),
  owner TEXT,
  expires_at BIGINT NOT NULL DEFAULT 0
);
INSERT INTO work_leases (bucket) SELECT generate_series(0, 63);

ALTER TABLE rate_decisions ADD COLUMN node TEXT;
-- The recovery looks for pending decisions of dead nodes every second.
CREATE INDEX rate_decisions_pending ON rate_decisions (node) WHERE status = 'pending';
ALTER TABLE webhook_claims ADD COLUMN node TEXT;

-- The per-portfolio API rate limit across API nodes (api/ratelimit_shared.c):
-- quota granted to a node, kept for the rolling minute plus a grant's
-- time to live.
CREATE TABLE ratelimit_grants (
  key TEXT NOT NULL,
  granted_at BIGINT NOT NULL,
  n BIGINT NOT NULL
);
CREATE INDEX ratelimit_grants_by_key ON ratelimit_grants (key, granted_at);
