-- The chat fast path (issue 4): a routed chat message is written by one statement
-- (store.EnqueueBound). When a statement that has already written must not commit, it calls
-- loopx_abort, whose SQLSTATE the caller recognises: nothing is kept and the caller takes the
-- general path instead.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION loopx_abort(reason text) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'LX001', MESSAGE = reason;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION loopx_abort(text);
