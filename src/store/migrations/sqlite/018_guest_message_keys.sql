-- PostgreSQL's 018 drops guest_messages' foreign keys (their per-row
-- locking checks were the largest part of a message insert there);
-- SQLite checks a key in-process with one index probe, so its keys stay.
-- Kept so both backends count the same migrations.
SELECT 1;
