-- The provider refused a call of p_model with 429 (or said nothing is
-- left): every worker defers the model's runs until now + p_pause_ms
-- (never earlier than a pause already recorded). p_adaptive: the provider
-- published no limits, so the concurrency cap is halved as well (when the
-- operator set none either); the first one is half of p_in_flight (the
-- calling worker's calls of the model in flight, the refused one
-- included) or of the calls model_calls counts, whichever is larger.
-- Creates the model's row when missing, as implicit: it is forgotten ten
-- minutes after its last pause ends (rl_take_model_limits).
--
-- The cap halves once per congestion event: p_run_id's attempt
-- p_attempt_no is the refused call, and a call dispatched before the
-- cap's last cut (cap_cut_at) was part of the burst that cut it, so its
-- 429 extends the pause and counts, and cuts nothing. Without the call
-- (NULL), every 429 cuts, as the previous release's statement expects.
CREATE OR REPLACE FUNCTION rl_model_throttled(
    p_model      text,
    p_pause_ms   bigint,
    p_adaptive   boolean,
    p_in_flight  integer,
    p_reason     text,
    p_run_id     text,
    p_attempt_no integer)
RETURNS TABLE (paused_until text, concurrency_cap integer)
LANGUAGE plpgsql
AS $fn$
#variable_conflict use_column
DECLARE
    v_flight integer;
    v_sent   timestamptz;
    v_cut    boolean;
BEGIN
    SELECT a.dispatched_at INTO v_sent
      FROM attempts a
     WHERE a.run_id = p_run_id AND a.attempt_no = p_attempt_no;
    INSERT INTO model_limits (model, implicit) VALUES (p_model, true)
        ON CONFLICT DO NOTHING;
    SELECT count(*) INTO v_flight
      FROM model_calls c
      JOIN attempts a ON a.run_id = c.run_id AND a.attempt_no = c.attempt_no
     WHERE c.model = p_model AND a.outcome IS NULL
       AND rl_model_call_leased(a.run_id, a.lease_epoch, a.worker)
       AND c.created_at > now() - interval '10 minutes';
    v_flight := greatest(v_flight, coalesce(p_in_flight, 0));
    -- Locked before it is read: concurrent 429s of one burst decide one
    -- after the other, and only the first sees no cut since the calls
    -- were sent.
    SELECT p_adaptive AND l.rpm IS NULL AND l.tpm IS NULL
           AND (v_sent IS NULL OR l.cap_cut_at IS NULL
                OR v_sent > l.cap_cut_at)
      INTO v_cut
      FROM model_limits l WHERE l.model = p_model
       FOR UPDATE;
    RETURN QUERY
    UPDATE model_limits m
       SET paused_until = greatest(m.paused_until, clock_timestamp()
                          + make_interval(secs => greatest(p_pause_ms, 0)
                                                  / 1000.0)),
           pause_reason = p_reason,
           throttles = m.throttles + 1,
           concurrency_cap =
               CASE WHEN v_cut
                    THEN greatest(1, coalesce(m.concurrency_cap, v_flight)
                                     / 2)
                    ELSE m.concurrency_cap END,
           cap_cut_at = CASE WHEN v_cut THEN clock_timestamp()
                             ELSE m.cap_cut_at END,
           cap_successes = CASE WHEN v_cut THEN 0 ELSE m.cap_successes END,
           updated_at = now()
     WHERE m.model = p_model
    RETURNING to_char(m.paused_until AT TIME ZONE 'UTC',
                      'YYYY-MM-DD"T"HH24:MI:SS.MS"+00:00"'),
              m.concurrency_cap;
END
$fn$;

-- The previous release's five-argument call: every 429 cuts.
CREATE OR REPLACE FUNCTION rl_model_throttled(
    p_model     text,
    p_pause_ms  bigint,
    p_adaptive  boolean,
    p_in_flight integer,
    p_reason    text)
RETURNS TABLE (paused_until text, concurrency_cap integer)
LANGUAGE sql
AS $fn$
    SELECT * FROM rl_model_throttled(p_model, p_pause_ms, p_adaptive,
                                     p_in_flight, p_reason, NULL, NULL)
$fn$;
