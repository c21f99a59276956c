-- 073_console_session_idle.sql: console sessions end when unused, not
-- only when old.
--
-- A sign-in lasted its whole absolute lifetime (12 hours by default)
-- however long the browser sat unused. last_seen_at is when a request
-- last used the session; the console refuses a session unused for longer
-- than RUNLEDGER_CONSOLE_SESSION_IDLE_SECONDS, and moves last_seen_at at
-- most every 15 seconds of use so that reading pages writes little.
ALTER TABLE console_sessions
    ADD COLUMN last_seen_at timestamptz NOT NULL DEFAULT now();
