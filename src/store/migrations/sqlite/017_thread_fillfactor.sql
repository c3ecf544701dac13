-- PostgreSQL's 017 leaves room in guest_threads' pages for in-place
-- updates; SQLite has no such setting (a b-tree row is rewritten in its
-- page). Kept so both backends count the same migrations.
SELECT 1;
