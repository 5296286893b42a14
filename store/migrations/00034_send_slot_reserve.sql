-- Reserve send slots (issue 4). The sender asked for a slot, was told how long to wait, slept,
-- and asked again; with several workers sharing the app's budget each send cost about a dozen
-- asks, each a transaction of four round trips: during a backlog the limiter alone ran ~500
-- transactions a second next to the chat ingest. loopx_take_send_slot books the earliest slot
-- that fits every scope in one call, so each send asks once and sleeps until its own slot.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION loopx_take_send_slot(scopes text[], intervals_us bigint[], taus_us bigint[], max_wait_us bigint,
                                     OUT wait_us bigint, OUT reserved boolean)
LANGUAGE plpgsql AS $$
DECLARE
    now_ts  timestamptz := clock_timestamp();
    send_at timestamptz := now_ts;
    r       record;
BEGIN
    INSERT INTO send_rate (scope, tat) SELECT s, '-infinity' FROM unnest(scopes) s ORDER BY s
        ON CONFLICT (scope) DO NOTHING;
    -- Generic cell rate algorithm: a send may go at tat - tau in every scope. The rows are
    -- locked in scope order, so concurrent takers queue instead of deadlocking.
    FOR r IN SELECT sr.tat, u.tau FROM send_rate sr JOIN unnest(scopes, taus_us) AS u(scope, tau) ON u.scope = sr.scope
             ORDER BY sr.scope FOR UPDATE OF sr
    LOOP
        send_at := greatest(send_at, r.tat - r.tau * interval '1 microsecond');
    END LOOP;
    wait_us := (extract(epoch FROM send_at - now_ts) * 1e6)::bigint;
    reserved := wait_us <= max_wait_us;
    IF reserved THEN
        UPDATE send_rate sr SET tat = greatest(sr.tat, send_at) + u.iv * interval '1 microsecond'
          FROM unnest(scopes, intervals_us) AS u(scope, iv) WHERE sr.scope = u.scope;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION loopx_take_send_slot(text[], bigint[], bigint[], bigint);
