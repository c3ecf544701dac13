-- Attempts in flight are recorded as claims, one row per recorder turn
-- listing the deliveries it started, instead of a lease written into every
-- delivery row (and into the due index) and cleared again by its outcome.
-- A claim is deleted with the outcome of its last delivery; the claims left
-- at start-up name the deliveries that may reach their receiver twice.
-- Their rows were never changed, so they are simply still due.
--
-- The due index is keyed by lane_hash, a 63-bit hash of the lane text
-- (computed by the server; queries also compare the lane itself), so an
-- entry is ~20 bytes instead of ~80 and a recorder turn touches a handful
-- of index pages instead of one or two per lane.

CREATE TABLE webhook_claims (
  id INTEGER PRIMARY KEY,
  seqs TEXT NOT NULL, -- webhook_deliveries.seq values, comma-separated
  created_at INTEGER NOT NULL
);

-- Leases of the previous engine become one claim, due again at once.
INSERT INTO webhook_claims (seqs, created_at)
  SELECT group_concat(seq), CAST(strftime('%s', 'now') AS INTEGER) * 1000
  FROM webhook_deliveries WHERE leased_until IS NOT NULL HAVING COUNT(*) > 0;
UPDATE webhook_deliveries SET next_attempt_at = leased_until - 60000
  WHERE leased_until IS NOT NULL;

DROP INDEX webhook_deliveries_due;
ALTER TABLE webhook_deliveries DROP COLUMN leased_until;
-- 0: not computed yet (rows made before this migration); the server fills
-- it in at start for deliveries still outstanding.
ALTER TABLE webhook_deliveries ADD COLUMN lane_hash INTEGER NOT NULL DEFAULT 0;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (lane_hash, next_attempt_at)
  WHERE next_attempt_at IS NOT NULL;
