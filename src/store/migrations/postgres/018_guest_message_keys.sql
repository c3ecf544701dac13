-- guest_messages loses its three foreign keys on PostgreSQL.
--
-- Each key's check ran, for every message inserted, a lookup through the
-- executor that locked the row it found (FOR KEY SHARE, a WAL record of
-- its own): the thread's, the portfolio's and the property's. On the
-- inbound WhatsApp path that was the largest part of the message insert
-- (docs/BENCHMARKS.md, session 34), as audit_entries' key was of a
-- decision's writes (010). Only guests/threads.c writes messages, with a
-- thread it read or made in the same transaction, the portfolio of the
-- caller and a property of that portfolio (the channel's, or one the feed
-- checked).
--
-- What the thread's key also did, refuse to delete (or re-key) a thread
-- that still has messages, a row trigger on guest_threads still does (a
-- merge moves the messages before it deletes the thread). Portfolios and
-- properties are never deleted by revops, and a property or portfolio with
-- messages has threads and thread properties whose keys refuse it anyway.
--
-- PostgreSQL only, as 010: SQLite checks a key in-process with one index
-- probe; sqlite/018_guest_message_keys.sql changes nothing and keeps the
-- numbering aligned. Written to be applied again over itself.
ALTER TABLE guest_messages DROP CONSTRAINT IF EXISTS guest_messages_thread_id_fkey;
ALTER TABLE guest_messages DROP CONSTRAINT IF EXISTS guest_messages_portfolio_id_fkey;
ALTER TABLE guest_messages DROP CONSTRAINT IF EXISTS guest_messages_property_id_fkey;

CREATE OR REPLACE FUNCTION guest_threads_keep_messages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM guest_messages WHERE thread_id = OLD.id) THEN
    RAISE EXCEPTION 'guest thread % has messages', OLD.id
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END;
$$;
DROP TRIGGER IF EXISTS guest_threads_messages ON guest_threads;
CREATE TRIGGER guest_threads_messages BEFORE DELETE OR UPDATE OF id ON guest_threads
  FOR EACH ROW EXECUTE FUNCTION guest_threads_keep_messages();
