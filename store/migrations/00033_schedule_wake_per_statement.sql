-- Wake heartbeats once per statement for new inbox items (issue 4). The chat's fast path
-- writes a batch of messages in one statement; a row trigger ran the rearm UPDATE once per
-- item. A statement trigger over the transition table rearms each agent once. Todos and gates
-- keep the row trigger: they arrive one at a time.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION loopx_schedule_wake_items() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    woken text;
BEGIN
    FOR woken IN
        UPDATE schedule s SET rearm = true
          FROM (SELECT DISTINCT goal_id, agent_id FROM new_items) n
         WHERE s.goal_id = n.goal_id AND s.kind = 'heartbeat' AND s.agent_id = n.agent_id
           AND s.enabled AND NOT s.held AND NOT s.rearm
        RETURNING s.goal_id
    LOOP
        PERFORM pg_notify('loopx_schedule', woken);
    END LOOP;
    RETURN NULL;
END $$;
-- +goose StatementEnd

DROP TRIGGER schedule_wake_inbox ON inbox_item;
CREATE TRIGGER schedule_wake_inbox AFTER INSERT ON inbox_item
    REFERENCING NEW TABLE AS new_items
    FOR EACH STATEMENT EXECUTE FUNCTION loopx_schedule_wake_items();

-- +goose Down
DROP TRIGGER schedule_wake_inbox ON inbox_item;
CREATE TRIGGER schedule_wake_inbox AFTER INSERT ON inbox_item
    FOR EACH ROW EXECUTE FUNCTION loopx_schedule_wake();
DROP FUNCTION loopx_schedule_wake_items();
