-- W3C Trace Context carried from the request that caused an event to the
-- webhook deliveries it fans out to (docs/api-guide.md, "HTTP behaviour"):
-- the traceparent the request would send downstream (its trace id, its own
-- span as parent), NULL when the request carried none. Added columns, no
-- rebuild: existing rows read NULL.
ALTER TABLE events ADD COLUMN traceparent TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN traceparent TEXT;
