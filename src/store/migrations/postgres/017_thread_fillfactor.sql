-- A guest thread's row is rewritten by every message of its guest
-- (waiting_since, last_message_id, ...), none of them indexed columns.
-- Room left in each page lets PostgreSQL write the new version beside the
-- old one (a heap-only tuple): no new entry in the table's three indexes,
-- and the old version pruned in place. Applies to pages written from now
-- on; an existing table gains it as its rows move.
ALTER TABLE guest_threads SET (fillfactor = 70);
