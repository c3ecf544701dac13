-- The state CHECK of webhook_deliveries, written as equalities instead of
-- IN (...), as sqlite/007_webhook_state_check.sql does (there to spare
-- SQLite 3.40 a temporary B-tree per statement). PostgreSQL alters a CHECK
-- in place, so no rebuild: the allowed values do not change, the rows, the
-- indexes and the identity counter of seq stay as they are.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_state_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_state_check
  CHECK (state = 'pending' OR state = 'retry_scheduled'
         OR state = 'delivered' OR state = 'dead_lettered');
