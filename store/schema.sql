-- The schema of LoopX's database after every migration in store/migrations, as pg_dump
-- prints it (comments and session settings left out). Generated: do not edit; change a
-- migration and run make schema. A test checks it against a freshly migrated database.
CREATE FUNCTION public.loopx_abort(reason text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'LX001', MESSAGE = reason;
END
$$;

CREATE FUNCTION public.loopx_message_agent(goal_id text, named text) RETURNS TABLE(agent_id text)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
    SELECT CASE
        WHEN $2 <> '' THEN (SELECT a.id FROM agent a WHERE a.goal_id = $1 AND a.id = $2)
        ELSE coalesce(
            (SELECT a.id FROM agent a WHERE a.goal_id = $1 AND a.is_default),
            (SELECT min(a.id) FROM agent a WHERE a.goal_id = $1 HAVING count(*) = 1))
    END
$_$;

CREATE FUNCTION public.loopx_role(owners text[], members text[], person text, is_admin boolean) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE
        WHEN is_admin THEN 'admin'
        WHEN person <> '' AND person = ANY (owners) THEN 'owner'
        WHEN person <> '' AND person = ANY (members) THEN 'member'
        ELSE 'stranger'
    END
$$;

CREATE FUNCTION public.loopx_schedule_sync_agent() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    g goal%ROWTYPE;
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE schedule SET enabled = false, updated_at = now()
         WHERE goal_id = OLD.goal_id AND kind = 'heartbeat' AND agent_id = OLD.id;
        RETURN OLD;
    END IF;
    SELECT * INTO g FROM goal WHERE id = NEW.goal_id;
    INSERT INTO schedule (goal_id, kind, agent_id, spec, tz, enabled)
    VALUES (NEW.goal_id, 'heartbeat', NEW.id, g.heartbeat_spec, g.heartbeat_tz, g.heartbeat_spec <> '' AND g.status <> 'done')
    ON CONFLICT (goal_id, kind, agent_id) DO UPDATE
       SET spec = EXCLUDED.spec, tz = EXCLUDED.tz, enabled = EXCLUDED.enabled,
           held = false, rearm = true, updated_at = now();
    PERFORM pg_notify('loopx_schedule', NEW.goal_id);
    RETURN NEW;
END $$;

CREATE FUNCTION public.loopx_schedule_sync_goal() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND NEW.heartbeat_spec IS NOT DISTINCT FROM OLD.heartbeat_spec
       AND NEW.heartbeat_tz IS NOT DISTINCT FROM OLD.heartbeat_tz
       AND NEW.report_spec IS NOT DISTINCT FROM OLD.report_spec
       AND NEW.report_tz IS NOT DISTINCT FROM OLD.report_tz
       AND NEW.status IS NOT DISTINCT FROM OLD.status
       AND NEW.allowed_slots IS NOT DISTINCT FROM OLD.allowed_slots
       AND NEW.window_hours IS NOT DISTINCT FROM OLD.window_hours THEN
        RETURN NEW;
    END IF;
    -- A changed spec, zone, status or budget is an explicit resume: clear the hold.
    UPDATE schedule SET spec = NEW.heartbeat_spec, tz = NEW.heartbeat_tz,
           enabled = NEW.heartbeat_spec <> '' AND NEW.status <> 'done', held = false, rearm = true, updated_at = now()
     WHERE goal_id = NEW.id AND kind = 'heartbeat';
    INSERT INTO schedule (goal_id, kind, agent_id, spec, tz, enabled)
    VALUES (NEW.id, 'report', '', NEW.report_spec, NEW.report_tz, NEW.report_spec <> '' AND NEW.status <> 'done')
    ON CONFLICT (goal_id, kind, agent_id) DO UPDATE
       SET spec = EXCLUDED.spec, tz = EXCLUDED.tz, enabled = EXCLUDED.enabled,
           held = false, rearm = true, updated_at = now();
    PERFORM pg_notify('loopx_schedule', NEW.id);
    RETURN NEW;
END $$;

CREATE FUNCTION public.loopx_schedule_wake() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_TABLE_NAME = 'inbox_item' THEN
        UPDATE schedule SET rearm = true
         WHERE goal_id = NEW.goal_id AND kind = 'heartbeat' AND agent_id = NEW.agent_id
           AND enabled AND NOT held AND NOT rearm;
    ELSE
        UPDATE schedule SET rearm = true
         WHERE goal_id = NEW.goal_id AND kind = 'heartbeat' AND enabled AND NOT held AND NOT rearm;
    END IF;
    IF FOUND THEN
        PERFORM pg_notify('loopx_schedule', NEW.goal_id);
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION public.loopx_schedule_wake_goal() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('loopx_schedule', NEW.goal_id);
    RETURN NULL;
END $$;

CREATE FUNCTION public.loopx_schedule_wake_items() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.loopx_take_send_slot(scopes text[], intervals_us bigint[], taus_us bigint[], max_wait_us bigint, OUT wait_us bigint, OUT reserved boolean) RETURNS record
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.loopx_workspace_notify() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('loopx_workspace', OLD.goal_id);
    ELSE
        PERFORM pg_notify('loopx_workspace', NEW.goal_id);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION public.loopx_workspace_notify_goal() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('loopx_workspace', NEW.id);
    RETURN NULL;
END $$;

CREATE FUNCTION public.outbox_notify() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    messages boolean;
    reactions boolean;
BEGIN
    SELECT bool_or(kind <> 'reaction'), bool_or(kind = 'reaction') INTO messages, reactions FROM new_rows;
    IF messages AND pg_try_advisory_xact_lock(hashtext('loopx'), hashtext('outbox_notify')) THEN
        PERFORM pg_notify('loopx_outbox', 'messages');
    END IF;
    IF reactions AND coalesce(current_setting('loopx.quiet_reactions', true), '') <> 'on'
       AND pg_try_advisory_xact_lock(hashtext('loopx'), hashtext('outbox_notify_reactions')) THEN
        PERFORM pg_notify('loopx_outbox', 'reactions');
    END IF;
    RETURN NULL;
END
$$;

CREATE TABLE public.agent (
    goal_id text NOT NULL,
    id text NOT NULL,
    runner text DEFAULT 'poll'::text NOT NULL,
    runner_config jsonb DEFAULT '{}'::jsonb NOT NULL,
    work_mode text DEFAULT 'active'::text NOT NULL,
    is_default boolean DEFAULT false NOT NULL,
    token_hash bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    held_at timestamp with time zone,
    held_reason text DEFAULT ''::text NOT NULL,
    held_by text DEFAULT ''::text NOT NULL,
    held_failures integer DEFAULT 0 NOT NULL,
    resumed_at timestamp with time zone,
    capabilities text[] DEFAULT '{}'::text[] NOT NULL,
    replan_acked bigint DEFAULT 0 NOT NULL,
    CONSTRAINT agent_held_reason_check CHECK ((held_reason = ANY (ARRAY[''::text, 'failures'::text, 'owner'::text]))),
    CONSTRAINT agent_id_check CHECK ((id ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text)),
    CONSTRAINT agent_runner_check CHECK ((runner = ANY (ARRAY['exec'::text, 'webhook'::text, 'poll'::text]))),
    CONSTRAINT agent_work_mode_check CHECK ((work_mode = ANY (ARRAY['active'::text, 'monitor_only'::text])))
);

CREATE TABLE public.agent_secret (
    goal_id text NOT NULL,
    agent_id text NOT NULL,
    name text NOT NULL,
    sealed bytea NOT NULL,
    key_id text NOT NULL,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_secret_name_check CHECK ((name ~ '^(secret|env\.[A-Za-z_][A-Za-z0-9_]{0,127})$'::text))
);

CREATE TABLE public.attachment (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    inbox_item_id bigint,
    reply_of bigint,
    evidence_id bigint,
    name text NOT NULL,
    mime text DEFAULT 'application/octet-stream'::text NOT NULL,
    kind text DEFAULT 'file'::text NOT NULL,
    sha256 bytea,
    size bigint,
    state text DEFAULT 'stored'::text NOT NULL,
    lark_message text DEFAULT ''::text NOT NULL,
    lark_key text DEFAULT ''::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone,
    claimed_by text DEFAULT ''::text NOT NULL,
    error text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT attachment_check CHECK ((num_nonnulls(inbox_item_id, reply_of, evidence_id) = 1)),
    CONSTRAINT attachment_check1 CHECK (((state <> 'stored'::text) OR (sha256 IS NOT NULL))),
    CONSTRAINT attachment_kind_check CHECK ((kind = ANY (ARRAY['image'::text, 'file'::text]))),
    CONSTRAINT attachment_mime_check CHECK ((length(mime) <= 200)),
    CONSTRAINT attachment_name_check CHECK (((length(name) >= 1) AND (length(name) <= 255))),
    CONSTRAINT attachment_state_check CHECK ((state = ANY (ARRAY['fetching'::text, 'stored'::text, 'failed'::text])))
);

CREATE SEQUENCE public.attachment_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.attachment_id_seq OWNED BY public.attachment.id;

CREATE TABLE public.audit (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    actor text NOT NULL,
    surface text NOT NULL,
    action text NOT NULL,
    goal_id text DEFAULT ''::text NOT NULL,
    target text DEFAULT ''::text NOT NULL,
    allowed boolean NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    outcome text DEFAULT 'ok'::text NOT NULL,
    CONSTRAINT audit_outcome_check CHECK ((outcome = ANY (ARRAY['ok'::text, 'refused'::text, 'forbidden'::text, 'conflict'::text, 'full'::text]))),
    CONSTRAINT audit_surface_check CHECK ((surface = ANY (ARRAY['api'::text, 'chat'::text, 'card'::text, 'scheduler'::text, 'system'::text, 'web'::text])))
);

CREATE SEQUENCE public.audit_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.audit_id_seq OWNED BY public.audit.id;

CREATE TABLE public.binding (
    chat_id text NOT NULL,
    thread_root text DEFAULT ''::text NOT NULL,
    goal_id text NOT NULL,
    agent_id text DEFAULT ''::text NOT NULL,
    created_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.chat_setting (
    chat_id text NOT NULL,
    lang text NOT NULL,
    updated_by text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT chat_setting_lang_check CHECK ((lang = ANY (ARRAY['en'::text, 'zh'::text])))
);

CREATE TABLE public.criterion_waiver (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    todo_id bigint,
    criterion text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    waived_by text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT criterion_waiver_reason_check CHECK ((length(reason) <= 2000))
);

CREATE SEQUENCE public.criterion_waiver_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.criterion_waiver_id_seq OWNED BY public.criterion_waiver.id;

CREATE TABLE public.digest (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    window_start timestamp with time zone NOT NULL,
    window_end timestamp with time zone NOT NULL,
    trigger text NOT NULL,
    requested_by text DEFAULT ''::text NOT NULL,
    lang text DEFAULT 'en'::text NOT NULL,
    facts jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    quiet boolean DEFAULT false NOT NULL,
    CONSTRAINT digest_trigger_check CHECK ((trigger = ANY (ARRAY['schedule'::text, 'manual'::text])))
);

CREATE SEQUENCE public.digest_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.digest_id_seq OWNED BY public.digest.id;

CREATE TABLE public.evidence (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    agent_id text NOT NULL,
    todo_id bigint,
    turn_id bigint,
    kind text DEFAULT 'note'::text NOT NULL,
    summary text NOT NULL,
    ref text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    criteria text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT evidence_kind_check CHECK ((kind = ANY (ARRAY['link'::text, 'command'::text, 'note'::text, 'artifact'::text]))),
    CONSTRAINT evidence_ref_check CHECK ((length(ref) <= 2000)),
    CONSTRAINT evidence_summary_check CHECK (((length(summary) >= 1) AND (length(summary) <= 12000)))
);

CREATE SEQUENCE public.evidence_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.evidence_id_seq OWNED BY public.evidence.id;

CREATE TABLE public.file_blob (
    sha256 bytea NOT NULL,
    size bigint NOT NULL,
    backend text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT file_blob_backend_check CHECK ((backend = ANY (ARRAY['pg'::text, 's3'::text]))),
    CONSTRAINT file_blob_sha256_check CHECK ((length(sha256) = 32)),
    CONSTRAINT file_blob_size_check CHECK ((size >= 0))
);

CREATE TABLE public.file_chunk (
    sha256 bytea NOT NULL,
    seq integer NOT NULL,
    data bytea NOT NULL,
    CONSTRAINT file_chunk_seq_check CHECK ((seq >= 0))
);

CREATE TABLE public.gate (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    agent_id text DEFAULT ''::text NOT NULL,
    kind text DEFAULT 'question'::text NOT NULL,
    question text NOT NULL,
    options text[] DEFAULT '{approve,reject}'::text[] NOT NULL,
    todo_id bigint,
    status text DEFAULT 'open'::text NOT NULL,
    answered_by text,
    answer text,
    comment text,
    answered_at timestamp with time zone,
    card_version integer DEFAULT 1 NOT NULL,
    reminders integer DEFAULT 0 NOT NULL,
    next_reminder_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    request jsonb,
    expires_at timestamp with time zone,
    CONSTRAINT gate_kind_check CHECK ((kind = ANY (ARRAY['question'::text, 'stall'::text, 'permission'::text]))),
    CONSTRAINT gate_question_check CHECK (((length(question) >= 1) AND (length(question) <= 12000))),
    CONSTRAINT gate_status_check CHECK ((status = ANY (ARRAY['open'::text, 'approved'::text, 'rejected'::text, 'answered'::text, 'cancelled'::text])))
);

CREATE SEQUENCE public.gate_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.gate_id_seq OWNED BY public.gate.id;

CREATE TABLE public.goal (
    id text NOT NULL,
    title text DEFAULT ''::text NOT NULL,
    objective text DEFAULT ''::text NOT NULL,
    owners text[] DEFAULT '{}'::text[] NOT NULL,
    members text[] DEFAULT '{}'::text[] NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    window_hours integer DEFAULT 24 NOT NULL,
    allowed_slots integer DEFAULT 24 NOT NULL,
    heartbeat_spec text DEFAULT ''::text NOT NULL,
    heartbeat_tz text DEFAULT 'UTC'::text NOT NULL,
    report_spec text DEFAULT ''::text NOT NULL,
    report_tz text DEFAULT 'UTC'::text NOT NULL,
    lang text DEFAULT 'en'::text NOT NULL,
    stall_turns integer DEFAULT 3 NOT NULL,
    version bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    breaker_failures integer,
    progress_card boolean,
    quiet_digests boolean,
    overrides text[] DEFAULT '{}'::text[] NOT NULL,
    reminder_minutes integer[],
    reminder_escalate_after integer,
    scope_editable text[] DEFAULT '{}'::text[] NOT NULL,
    scope_protected text[] DEFAULT '{}'::text[] NOT NULL,
    scope_notes text DEFAULT ''::text NOT NULL,
    capabilities text[] DEFAULT '{}'::text[] NOT NULL,
    criteria jsonb DEFAULT '[]'::jsonb NOT NULL,
    CONSTRAINT goal_allowed_slots_check CHECK ((allowed_slots >= 0)),
    CONSTRAINT goal_breaker_failures_check CHECK (((breaker_failures >= 0) AND (breaker_failures <= 100))),
    CONSTRAINT goal_criteria_check CHECK ((jsonb_typeof(criteria) = 'array'::text)),
    CONSTRAINT goal_id_check CHECK ((id ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text)),
    CONSTRAINT goal_lang_check CHECK ((lang = ANY (ARRAY['en'::text, 'zh'::text]))),
    CONSTRAINT goal_objective_check CHECK ((length(objective) <= 12000)),
    CONSTRAINT goal_reminder_escalate_after_check CHECK (((reminder_escalate_after >= 1) AND (reminder_escalate_after <= 100))),
    CONSTRAINT goal_reminder_minutes_check CHECK (((cardinality(reminder_minutes) >= 1) AND (cardinality(reminder_minutes) <= 10))),
    CONSTRAINT goal_scope_notes_check CHECK ((length(scope_notes) <= 4000)),
    CONSTRAINT goal_stall_turns_check CHECK ((stall_turns >= 0)),
    CONSTRAINT goal_status_check CHECK ((status = ANY (ARRAY['active'::text, 'stopped'::text, 'done'::text]))),
    CONSTRAINT goal_title_check CHECK ((length(title) <= 200)),
    CONSTRAINT goal_window_hours_check CHECK (((window_hours >= 1) AND (window_hours <= 720)))
);

CREATE TABLE public.goal_decision (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    kind text NOT NULL,
    proposal_id bigint,
    goal_version bigint NOT NULL,
    before text DEFAULT ''::text NOT NULL,
    after text DEFAULT ''::text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    proposed_by text NOT NULL,
    decided_by text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT goal_decision_kind_check CHECK ((kind = ANY (ARRAY['replan'::text, 'done'::text, 'reopen'::text]))),
    CONSTRAINT goal_decision_reason_check CHECK ((length(reason) <= 2000))
);

CREATE SEQUENCE public.goal_decision_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.goal_decision_id_seq OWNED BY public.goal_decision.id;

CREATE TABLE public.goose_db_version (
    id integer NOT NULL,
    version_id bigint NOT NULL,
    is_applied boolean NOT NULL,
    tstamp timestamp without time zone DEFAULT now() NOT NULL
);

ALTER TABLE public.goose_db_version ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.goose_db_version_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.handoff (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    todo_id bigint,
    turn_id bigint,
    from_agent text DEFAULT ''::text NOT NULL,
    to_agent text NOT NULL,
    kind text NOT NULL,
    done text DEFAULT ''::text NOT NULL,
    next text DEFAULT ''::text NOT NULL,
    questions text DEFAULT ''::text NOT NULL,
    evidence_ids bigint[] DEFAULT '{}'::bigint[] NOT NULL,
    gate_id bigint,
    created_by text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    acked_at timestamp with time zone,
    acked_by text DEFAULT ''::text NOT NULL,
    CONSTRAINT handoff_done_check CHECK ((length(done) <= 4000)),
    CONSTRAINT handoff_kind_check CHECK ((kind = ANY (ARRAY['resume'::text, 'review'::text, 'verify'::text, 'answer_gate'::text]))),
    CONSTRAINT handoff_next_check CHECK ((length(next) <= 4000)),
    CONSTRAINT handoff_questions_check CHECK ((length(questions) <= 4000))
);

CREATE SEQUENCE public.handoff_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.handoff_id_seq OWNED BY public.handoff.id;

CREATE TABLE public.hint_state (
    goal_id text NOT NULL,
    agent_id text NOT NULL,
    identity text NOT NULL,
    step integer DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.inbox_item (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    agent_id text NOT NULL,
    session_id text DEFAULT ''::text NOT NULL,
    mode text DEFAULT 'inbox'::text NOT NULL,
    text text NOT NULL,
    sender text NOT NULL,
    source_chat text DEFAULT ''::text NOT NULL,
    source_message text DEFAULT ''::text NOT NULL,
    source_thread text DEFAULT ''::text NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    turn_id bigint,
    deliveries integer DEFAULT 0 NOT NULL,
    delivered_at timestamp with time zone,
    acked_at timestamp with time zone,
    expires_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    redeliver_at timestamp with time zone,
    CONSTRAINT inbox_item_mode_check CHECK ((mode = ANY (ARRAY['inbox'::text, 'queue'::text, 'steer'::text]))),
    CONSTRAINT inbox_item_state_check CHECK ((state = ANY (ARRAY['fetching'::text, 'pending'::text, 'delivered'::text, 'acked'::text, 'expired'::text]))),
    CONSTRAINT inbox_item_text_check CHECK (((length(text) >= 1) AND (length(text) <= 12000)))
);

CREATE SEQUENCE public.inbox_item_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.inbox_item_id_seq OWNED BY public.inbox_item.id;

CREATE TABLE public.lark_event (
    event_id text NOT NULL,
    event_type text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.machine_defaults (
    id boolean DEFAULT true NOT NULL,
    window_hours integer DEFAULT 24 NOT NULL,
    allowed_slots integer DEFAULT 24 NOT NULL,
    stall_turns integer DEFAULT 3 NOT NULL,
    heartbeat_spec text DEFAULT ''::text NOT NULL,
    heartbeat_tz text DEFAULT 'UTC'::text NOT NULL,
    report_spec text DEFAULT ''::text NOT NULL,
    report_tz text DEFAULT 'UTC'::text NOT NULL,
    lang text DEFAULT 'en'::text NOT NULL,
    reminder_minutes integer[] DEFAULT '{30,60,120}'::integer[] NOT NULL,
    reminder_escalate_after integer DEFAULT 3 NOT NULL,
    permission_timeout_seconds integer DEFAULT 600 NOT NULL,
    breaker_failures integer DEFAULT 3 NOT NULL,
    progress_card boolean DEFAULT true NOT NULL,
    quiet_digests boolean DEFAULT true NOT NULL,
    version bigint DEFAULT 1 NOT NULL,
    updated_by text DEFAULT ''::text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT machine_defaults_allowed_slots_check CHECK (((allowed_slots >= 0) AND (allowed_slots <= 100000))),
    CONSTRAINT machine_defaults_breaker_failures_check CHECK (((breaker_failures >= 0) AND (breaker_failures <= 100))),
    CONSTRAINT machine_defaults_id_check CHECK (id),
    CONSTRAINT machine_defaults_lang_check CHECK ((lang = ANY (ARRAY['en'::text, 'zh'::text]))),
    CONSTRAINT machine_defaults_permission_timeout_seconds_check CHECK (((permission_timeout_seconds >= 10) AND (permission_timeout_seconds <= 86400))),
    CONSTRAINT machine_defaults_reminder_escalate_after_check CHECK (((reminder_escalate_after >= 1) AND (reminder_escalate_after <= 100))),
    CONSTRAINT machine_defaults_reminder_minutes_check CHECK (((cardinality(reminder_minutes) >= 1) AND (cardinality(reminder_minutes) <= 10))),
    CONSTRAINT machine_defaults_stall_turns_check CHECK (((stall_turns >= 0) AND (stall_turns <= 100))),
    CONSTRAINT machine_defaults_window_hours_check CHECK (((window_hours >= 1) AND (window_hours <= 720)))
);

CREATE TABLE public.outbox (
    id bigint NOT NULL,
    uuid text NOT NULL,
    dedupe_key text,
    kind text NOT NULL,
    receive_id_type text DEFAULT 'chat_id'::text NOT NULL,
    receive_id text NOT NULL,
    reply_to text DEFAULT ''::text NOT NULL,
    reply_in_thread boolean DEFAULT false NOT NULL,
    update_of bigint,
    target_message text DEFAULT ''::text NOT NULL,
    content text NOT NULL,
    goal_id text DEFAULT ''::text NOT NULL,
    agent_id text DEFAULT ''::text NOT NULL,
    session_id text DEFAULT ''::text NOT NULL,
    gate_id bigint,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_until timestamp with time zone,
    last_code integer DEFAULT 0 NOT NULL,
    last_error text DEFAULT ''::text NOT NULL,
    lark_message_id text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    claimed_by text DEFAULT ''::text NOT NULL,
    CONSTRAINT outbox_kind_check CHECK ((kind = ANY (ARRAY['text'::text, 'card'::text, 'card_update'::text, 'reaction'::text, 'file'::text]))),
    CONSTRAINT outbox_receive_id_type_check CHECK ((receive_id_type = ANY (ARRAY['chat_id'::text, 'open_id'::text]))),
    CONSTRAINT outbox_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'sending'::text, 'sent'::text, 'failed'::text])))
);

CREATE SEQUENCE public.outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.outbox_id_seq OWNED BY public.outbox.id;

CREATE TABLE public.permission_policy (
    goal_id text NOT NULL,
    timeout_seconds integer DEFAULT 600 NOT NULL,
    allow_tools text[] DEFAULT '{}'::text[] NOT NULL,
    deny_tools text[] DEFAULT '{}'::text[] NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    timeout_set boolean DEFAULT true NOT NULL,
    CONSTRAINT permission_policy_timeout_seconds_check CHECK (((timeout_seconds >= 10) AND (timeout_seconds <= 86400)))
);

CREATE TABLE public.proposal (
    id bigint NOT NULL,
    goal_id text,
    agent_id text DEFAULT ''::text NOT NULL,
    kind text NOT NULL,
    params jsonb NOT NULL,
    diff jsonb NOT NULL,
    effects jsonb DEFAULT '[]'::jsonb NOT NULL,
    goal_version bigint NOT NULL,
    need text NOT NULL,
    state text DEFAULT 'preview_ready'::text NOT NULL,
    proposed_by text NOT NULL,
    surface text NOT NULL,
    decided_by text DEFAULT ''::text NOT NULL,
    decided_at timestamp with time zone,
    reason text DEFAULT ''::text NOT NULL,
    successor_id bigint,
    applied_version bigint,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT proposal_goal_check CHECK (((kind = 'defaults.set'::text) = (goal_id IS NULL))),
    CONSTRAINT proposal_kind_check CHECK ((kind = ANY (ARRAY['goal.set'::text, 'goal.pause'::text, 'goal.resume'::text, 'agent.set'::text, 'goal.done'::text, 'goal.reopen'::text, 'goal.replan'::text, 'defaults.set'::text]))),
    CONSTRAINT proposal_need_check CHECK ((need = ANY (ARRAY['owner'::text, 'admin'::text]))),
    CONSTRAINT proposal_state_check CHECK ((state = ANY (ARRAY['preview_ready'::text, 'applied'::text, 'stale'::text, 'cancelled'::text, 'expired'::text, 'refused'::text])))
);

CREATE TABLE public.proposal_card (
    proposal_id bigint NOT NULL,
    outbox_id bigint NOT NULL
);

CREATE SEQUENCE public.proposal_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.proposal_id_seq OWNED BY public.proposal.id;

CREATE TABLE public.quota_ledger (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    agent_id text DEFAULT ''::text NOT NULL,
    kind text NOT NULL,
    turn_id bigint,
    todo_id bigint,
    slots integer DEFAULT 0 NOT NULL,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT quota_ledger_kind_check CHECK ((kind = ANY (ARRAY['slot_spent'::text, 'slot_voided'::text, 'state_refreshed'::text, 'tick_decision'::text])))
);

CREATE SEQUENCE public.quota_ledger_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.quota_ledger_id_seq OWNED BY public.quota_ledger.id;

CREATE TABLE public.receipt (
    key text NOT NULL,
    request_hash bytea NOT NULL,
    status integer NOT NULL,
    body jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.release_seen (
    version text NOT NULL,
    schema_version bigint NOT NULL,
    commit_id text DEFAULT ''::text NOT NULL,
    first_seen timestamp with time zone DEFAULT now() NOT NULL,
    last_seen timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.run_request (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    agent_id text NOT NULL,
    requested_by text NOT NULL,
    surface text NOT NULL,
    chat_id text DEFAULT ''::text NOT NULL,
    reply_to text DEFAULT ''::text NOT NULL,
    lang text DEFAULT ''::text NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    claimed_by text DEFAULT ''::text NOT NULL,
    claimed_until timestamp with time zone,
    outcome jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone NOT NULL,
    done_at timestamp with time zone,
    CONSTRAINT run_request_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'done'::text])))
);

CREATE SEQUENCE public.run_request_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.run_request_id_seq OWNED BY public.run_request.id;

CREATE TABLE public.schedule (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    agent_id text DEFAULT ''::text NOT NULL,
    kind text NOT NULL,
    spec text DEFAULT ''::text NOT NULL,
    tz text DEFAULT 'UTC'::text NOT NULL,
    enabled boolean DEFAULT true NOT NULL,
    held boolean DEFAULT false NOT NULL,
    rearm boolean DEFAULT true NOT NULL,
    next_fire_at timestamp with time zone,
    next_run_at timestamp with time zone,
    last_fire_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_by text DEFAULT ''::text NOT NULL,
    CONSTRAINT schedule_kind_check CHECK ((kind = ANY (ARRAY['heartbeat'::text, 'report'::text])))
);

CREATE SEQUENCE public.schedule_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.schedule_id_seq OWNED BY public.schedule.id;

CREATE TABLE public.send_rate (
    scope text NOT NULL,
    tat timestamp with time zone NOT NULL
);

CREATE TABLE public.tick (
    id bigint NOT NULL,
    schedule_id bigint NOT NULL,
    goal_id text NOT NULL,
    agent_id text DEFAULT ''::text NOT NULL,
    kind text NOT NULL,
    fire_at timestamp with time zone NOT NULL,
    run_at timestamp with time zone NOT NULL,
    outcome text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    catch_up boolean DEFAULT false NOT NULL,
    decision jsonb DEFAULT '{}'::jsonb NOT NULL,
    turn_id bigint,
    next_fire_at timestamp with time zone,
    replica text DEFAULT ''::text NOT NULL,
    decided_at timestamp with time zone NOT NULL,
    CONSTRAINT tick_outcome_check CHECK ((outcome = ANY (ARRAY['ran'::text, 'due'::text, 'skipped'::text, 'missed'::text])))
);

CREATE SEQUENCE public.tick_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.tick_id_seq OWNED BY public.tick.id;

CREATE TABLE public.todo (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    role text DEFAULT 'agent'::text NOT NULL,
    text text NOT NULL,
    priority smallint DEFAULT 2 NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    claimed_by text,
    claimed_at timestamp with time zone,
    lease_expires_at timestamp with time zone,
    blocked_by_gate bigint,
    created_by text DEFAULT ''::text NOT NULL,
    version bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    done_at timestamp with time zone,
    criteria jsonb DEFAULT '[]'::jsonb NOT NULL,
    requires text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT todo_criteria_check CHECK ((jsonb_typeof(criteria) = 'array'::text)),
    CONSTRAINT todo_priority_check CHECK (((priority >= 0) AND (priority <= 4))),
    CONSTRAINT todo_role_check CHECK ((role = ANY (ARRAY['agent'::text, 'user'::text]))),
    CONSTRAINT todo_status_check CHECK ((status = ANY (ARRAY['open'::text, 'blocked'::text, 'done'::text, 'cancelled'::text]))),
    CONSTRAINT todo_text_check CHECK (((length(text) >= 1) AND (length(text) <= 12000)))
);

CREATE SEQUENCE public.todo_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.todo_id_seq OWNED BY public.todo.id;

CREATE TABLE public.turn (
    id bigint NOT NULL,
    goal_id text NOT NULL,
    agent_id text NOT NULL,
    instance_id text NOT NULL,
    session_id text DEFAULT ''::text NOT NULL,
    todo_id bigint,
    action text DEFAULT ''::text NOT NULL,
    state text DEFAULT 'live'::text NOT NULL,
    progress boolean DEFAULT false NOT NULL,
    lease_expires_at timestamp with time zone NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    ended_at timestamp with time zone,
    outcome text DEFAULT ''::text NOT NULL,
    log_tail text DEFAULT ''::text NOT NULL,
    via text DEFAULT ''::text NOT NULL,
    stop_requested_at timestamp with time zone,
    stop_requested_by text DEFAULT ''::text NOT NULL,
    note_rev integer DEFAULT 0 NOT NULL,
    card_state text DEFAULT 'new'::text NOT NULL,
    CONSTRAINT turn_card_state_check CHECK ((card_state = ANY (ARRAY['new'::text, 'live'::text, 'quiet'::text, 'done'::text]))),
    CONSTRAINT turn_state_check CHECK ((state = ANY (ARRAY['live'::text, 'ok'::text, 'failed'::text, 'abandoned'::text, 'stopped'::text]))),
    CONSTRAINT turn_via_check CHECK ((via = ANY (ARRAY[''::text, 'exec'::text, 'webhook'::text, 'mcp'::text, 'cli'::text, 'run'::text])))
);

CREATE TABLE public.turn_card (
    turn_id bigint NOT NULL,
    receive_id_type text DEFAULT 'chat_id'::text NOT NULL,
    receive_id text NOT NULL,
    outbox_id bigint NOT NULL,
    rev integer DEFAULT 0 NOT NULL,
    shown_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.turn_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.turn_id_seq OWNED BY public.turn.id;

CREATE TABLE public.turn_note (
    id bigint NOT NULL,
    turn_id bigint NOT NULL,
    text text NOT NULL,
    at timestamp with time zone NOT NULL,
    CONSTRAINT turn_note_text_check CHECK (((length(text) >= 1) AND (length(text) <= 500)))
);

CREATE SEQUENCE public.turn_note_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.turn_note_id_seq OWNED BY public.turn_note.id;

CREATE TABLE public.turn_token (
    token_hash bytea NOT NULL,
    goal_id text NOT NULL,
    agent_id text NOT NULL,
    turn_id bigint NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.unrouted (
    id bigint NOT NULL,
    chat_id text NOT NULL,
    message_id text NOT NULL,
    sender text NOT NULL,
    text text NOT NULL,
    reason text NOT NULL,
    candidates text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.unrouted_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.unrouted_id_seq OWNED BY public.unrouted.id;

CREATE TABLE public.web_session (
    id_hash bytea NOT NULL,
    open_id text DEFAULT ''::text NOT NULL,
    admin boolean DEFAULT false NOT NULL,
    csrf text NOT NULL,
    lang text DEFAULT ''::text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT web_session_lang_check CHECK ((lang = ANY (ARRAY[''::text, 'en'::text, 'zh'::text])))
);

CREATE TABLE public.web_signin (
    token_hash bytea NOT NULL,
    open_id text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    lang text DEFAULT ''::text NOT NULL,
    next text DEFAULT ''::text NOT NULL,
    admin boolean DEFAULT false NOT NULL,
    CONSTRAINT web_signin_lang_check CHECK ((lang = ANY (ARRAY[''::text, 'en'::text, 'zh'::text]))),
    CONSTRAINT web_signin_next_check CHECK ((length(next) <= 300))
);

ALTER TABLE ONLY public.attachment ALTER COLUMN id SET DEFAULT nextval('public.attachment_id_seq'::regclass);

ALTER TABLE ONLY public.audit ALTER COLUMN id SET DEFAULT nextval('public.audit_id_seq'::regclass);

ALTER TABLE ONLY public.criterion_waiver ALTER COLUMN id SET DEFAULT nextval('public.criterion_waiver_id_seq'::regclass);

ALTER TABLE ONLY public.digest ALTER COLUMN id SET DEFAULT nextval('public.digest_id_seq'::regclass);

ALTER TABLE ONLY public.evidence ALTER COLUMN id SET DEFAULT nextval('public.evidence_id_seq'::regclass);

ALTER TABLE ONLY public.gate ALTER COLUMN id SET DEFAULT nextval('public.gate_id_seq'::regclass);

ALTER TABLE ONLY public.goal_decision ALTER COLUMN id SET DEFAULT nextval('public.goal_decision_id_seq'::regclass);

ALTER TABLE ONLY public.handoff ALTER COLUMN id SET DEFAULT nextval('public.handoff_id_seq'::regclass);

ALTER TABLE ONLY public.inbox_item ALTER COLUMN id SET DEFAULT nextval('public.inbox_item_id_seq'::regclass);

ALTER TABLE ONLY public.outbox ALTER COLUMN id SET DEFAULT nextval('public.outbox_id_seq'::regclass);

ALTER TABLE ONLY public.proposal ALTER COLUMN id SET DEFAULT nextval('public.proposal_id_seq'::regclass);

ALTER TABLE ONLY public.quota_ledger ALTER COLUMN id SET DEFAULT nextval('public.quota_ledger_id_seq'::regclass);

ALTER TABLE ONLY public.run_request ALTER COLUMN id SET DEFAULT nextval('public.run_request_id_seq'::regclass);

ALTER TABLE ONLY public.schedule ALTER COLUMN id SET DEFAULT nextval('public.schedule_id_seq'::regclass);

ALTER TABLE ONLY public.tick ALTER COLUMN id SET DEFAULT nextval('public.tick_id_seq'::regclass);

ALTER TABLE ONLY public.todo ALTER COLUMN id SET DEFAULT nextval('public.todo_id_seq'::regclass);

ALTER TABLE ONLY public.turn ALTER COLUMN id SET DEFAULT nextval('public.turn_id_seq'::regclass);

ALTER TABLE ONLY public.turn_note ALTER COLUMN id SET DEFAULT nextval('public.turn_note_id_seq'::regclass);

ALTER TABLE ONLY public.unrouted ALTER COLUMN id SET DEFAULT nextval('public.unrouted_id_seq'::regclass);

ALTER TABLE ONLY public.agent
    ADD CONSTRAINT agent_pkey PRIMARY KEY (goal_id, id);

ALTER TABLE ONLY public.agent_secret
    ADD CONSTRAINT agent_secret_pkey PRIMARY KEY (goal_id, agent_id, name);

ALTER TABLE ONLY public.attachment
    ADD CONSTRAINT attachment_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.audit
    ADD CONSTRAINT audit_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.binding
    ADD CONSTRAINT binding_pkey PRIMARY KEY (chat_id, thread_root, goal_id);

ALTER TABLE ONLY public.chat_setting
    ADD CONSTRAINT chat_setting_pkey PRIMARY KEY (chat_id);

ALTER TABLE ONLY public.criterion_waiver
    ADD CONSTRAINT criterion_waiver_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.digest
    ADD CONSTRAINT digest_goal_id_window_end_key UNIQUE (goal_id, window_end);

ALTER TABLE ONLY public.digest
    ADD CONSTRAINT digest_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.evidence
    ADD CONSTRAINT evidence_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.file_blob
    ADD CONSTRAINT file_blob_pkey PRIMARY KEY (sha256);

ALTER TABLE ONLY public.file_chunk
    ADD CONSTRAINT file_chunk_pkey PRIMARY KEY (sha256, seq);

ALTER TABLE ONLY public.gate
    ADD CONSTRAINT gate_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.goal_decision
    ADD CONSTRAINT goal_decision_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.goal
    ADD CONSTRAINT goal_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.goose_db_version
    ADD CONSTRAINT goose_db_version_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.handoff
    ADD CONSTRAINT handoff_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.hint_state
    ADD CONSTRAINT hint_state_pkey PRIMARY KEY (goal_id, agent_id);

ALTER TABLE ONLY public.inbox_item
    ADD CONSTRAINT inbox_item_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.lark_event
    ADD CONSTRAINT lark_event_pkey PRIMARY KEY (event_id);

ALTER TABLE ONLY public.machine_defaults
    ADD CONSTRAINT machine_defaults_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_dedupe_key_key UNIQUE (dedupe_key);

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_uuid_key UNIQUE (uuid);

ALTER TABLE ONLY public.permission_policy
    ADD CONSTRAINT permission_policy_pkey PRIMARY KEY (goal_id);

ALTER TABLE ONLY public.proposal_card
    ADD CONSTRAINT proposal_card_pkey PRIMARY KEY (proposal_id, outbox_id);

ALTER TABLE ONLY public.proposal
    ADD CONSTRAINT proposal_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.quota_ledger
    ADD CONSTRAINT quota_ledger_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.receipt
    ADD CONSTRAINT receipt_pkey PRIMARY KEY (key);

ALTER TABLE ONLY public.release_seen
    ADD CONSTRAINT release_seen_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.run_request
    ADD CONSTRAINT run_request_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.schedule
    ADD CONSTRAINT schedule_goal_id_kind_agent_id_key UNIQUE (goal_id, kind, agent_id);

ALTER TABLE ONLY public.schedule
    ADD CONSTRAINT schedule_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.send_rate
    ADD CONSTRAINT send_rate_pkey PRIMARY KEY (scope);

ALTER TABLE ONLY public.tick
    ADD CONSTRAINT tick_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.tick
    ADD CONSTRAINT tick_schedule_id_fire_at_key UNIQUE (schedule_id, fire_at);

ALTER TABLE ONLY public.todo
    ADD CONSTRAINT todo_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.turn_card
    ADD CONSTRAINT turn_card_pkey PRIMARY KEY (turn_id, receive_id);

ALTER TABLE ONLY public.turn
    ADD CONSTRAINT turn_goal_id_agent_id_instance_id_key UNIQUE (goal_id, agent_id, instance_id);

ALTER TABLE ONLY public.turn_note
    ADD CONSTRAINT turn_note_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.turn
    ADD CONSTRAINT turn_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.turn_token
    ADD CONSTRAINT turn_token_pkey PRIMARY KEY (token_hash);

ALTER TABLE ONLY public.unrouted
    ADD CONSTRAINT unrouted_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.web_session
    ADD CONSTRAINT web_session_pkey PRIMARY KEY (id_hash);

ALTER TABLE ONLY public.web_signin
    ADD CONSTRAINT web_signin_pkey PRIMARY KEY (token_hash);

CREATE UNIQUE INDEX agent_one_default ON public.agent USING btree (goal_id) WHERE is_default;

CREATE UNIQUE INDEX agent_token ON public.agent USING btree (token_hash) WHERE (token_hash IS NOT NULL);

CREATE INDEX attachment_age ON public.attachment USING brin (created_at);

CREATE INDEX attachment_blob ON public.attachment USING btree (sha256) WHERE (sha256 IS NOT NULL);

CREATE INDEX attachment_evidence ON public.attachment USING btree (evidence_id) WHERE (evidence_id IS NOT NULL);

CREATE INDEX attachment_fetch ON public.attachment USING btree (next_attempt_at, id) WHERE (state = 'fetching'::text);

CREATE INDEX attachment_item ON public.attachment USING btree (inbox_item_id) WHERE (inbox_item_id IS NOT NULL);

CREATE INDEX attachment_reply ON public.attachment USING btree (reply_of) WHERE (reply_of IS NOT NULL);

CREATE INDEX audit_action ON public.audit USING btree (action, id);

CREATE INDEX audit_actor ON public.audit USING btree (actor, id);

CREATE INDEX audit_age ON public.audit USING brin (at);

CREATE INDEX audit_goal ON public.audit USING btree (goal_id, id);

CREATE INDEX binding_goal ON public.binding USING btree (goal_id);

CREATE INDEX chat_setting_by ON public.chat_setting USING btree (updated_by, updated_at DESC);

CREATE UNIQUE INDEX criterion_waiver_once ON public.criterion_waiver USING btree (goal_id, COALESCE(todo_id, (0)::bigint), criterion);

CREATE INDEX evidence_criteria ON public.evidence USING btree (goal_id, todo_id) WHERE (cardinality(criteria) > 0);

CREATE INDEX evidence_goal ON public.evidence USING btree (goal_id, id);

CREATE INDEX evidence_turn ON public.evidence USING btree (turn_id) WHERE (turn_id IS NOT NULL);

CREATE UNIQUE INDEX gate_one_open_stall ON public.gate USING btree (goal_id) WHERE ((kind = 'stall'::text) AND (status = 'open'::text));

CREATE INDEX gate_open ON public.gate USING btree (goal_id) WHERE (status = 'open'::text);

CREATE INDEX gate_permission_turn ON public.gate USING btree (goal_id, agent_id, ((request ->> 'turn'::text)), ((request ->> 'tool'::text))) WHERE ((kind = 'permission'::text) AND (answer = 'allow_turn'::text));

CREATE INDEX goal_decision_goal ON public.goal_decision USING btree (goal_id, id);

CREATE INDEX handoff_pending ON public.handoff USING btree (goal_id, to_agent, id) WHERE (acked_at IS NULL);

CREATE INDEX handoff_todo ON public.handoff USING btree (todo_id, id);

CREATE INDEX handoff_turn ON public.handoff USING btree (turn_id) WHERE (turn_id IS NOT NULL);

CREATE INDEX inbox_item_age ON public.inbox_item USING brin (created_at);

CREATE INDEX inbox_item_pending ON public.inbox_item USING btree (goal_id, agent_id, id) WHERE (state = ANY (ARRAY['pending'::text, 'delivered'::text]));

CREATE INDEX inbox_item_redeliver ON public.inbox_item USING btree (redeliver_at) WHERE (state = 'delivered'::text);

CREATE UNIQUE INDEX inbox_item_source ON public.inbox_item USING btree (source_message, goal_id, agent_id) WHERE (source_message <> ''::text);

CREATE INDEX lark_event_age ON public.lark_event USING brin (received_at);

CREATE INDEX outbox_age ON public.outbox USING brin (created_at);

CREATE INDEX outbox_chat_head ON public.outbox USING btree (receive_id, id) WHERE ((state = ANY (ARRAY['pending'::text, 'sending'::text])) AND (kind <> 'reaction'::text));

CREATE INDEX outbox_claimed ON public.outbox USING btree (claimed_until) WHERE (state = 'sending'::text);

CREATE INDEX outbox_failed ON public.outbox USING btree (id) WHERE (state = 'failed'::text);

CREATE INDEX outbox_gate ON public.outbox USING btree (gate_id) WHERE (gate_id IS NOT NULL);

CREATE INDEX outbox_lark_message ON public.outbox USING btree (lark_message_id) WHERE (lark_message_id <> ''::text);

CREATE INDEX outbox_reaction_due ON public.outbox USING btree (next_attempt_at, id) WHERE ((state = 'pending'::text) AND (kind = 'reaction'::text));

CREATE INDEX outbox_update_of ON public.outbox USING btree (update_of) WHERE (update_of IS NOT NULL);

CREATE INDEX proposal_goal ON public.proposal USING btree (goal_id, id);

CREATE UNIQUE INDEX proposal_one_ready_done ON public.proposal USING btree (goal_id) WHERE ((kind = 'goal.done'::text) AND (state = 'preview_ready'::text));

CREATE INDEX proposal_ready ON public.proposal USING btree (goal_id, id) WHERE (state = 'preview_ready'::text);

CREATE INDEX quota_ledger_age ON public.quota_ledger USING brin (created_at);

CREATE INDEX quota_ledger_decision ON public.quota_ledger USING btree (goal_id, id DESC) WHERE (kind = 'tick_decision'::text);

CREATE UNIQUE INDEX quota_ledger_one_spend ON public.quota_ledger USING btree (turn_id) WHERE (kind = 'slot_spent'::text);

CREATE INDEX quota_ledger_refresh ON public.quota_ledger USING btree (goal_id, agent_id, id DESC) WHERE (kind = 'state_refreshed'::text);

CREATE INDEX quota_ledger_spent ON public.quota_ledger USING btree (goal_id, created_at) WHERE (kind = 'slot_spent'::text);

CREATE INDEX quota_ledger_turn ON public.quota_ledger USING btree (turn_id) WHERE (turn_id IS NOT NULL);

CREATE INDEX receipt_age ON public.receipt USING btree (created_at);

CREATE INDEX run_request_age ON public.run_request USING brin (created_at);

CREATE INDEX run_request_pending ON public.run_request USING btree (id) WHERE (state = 'pending'::text);

CREATE INDEX schedule_due ON public.schedule USING btree (next_run_at) WHERE (enabled AND (NOT held) AND (NOT rearm));

CREATE INDEX schedule_rearm ON public.schedule USING btree (id) WHERE (rearm AND enabled);

CREATE INDEX tick_age ON public.tick USING brin (fire_at);

CREATE INDEX todo_blocked ON public.todo USING btree (goal_id) WHERE (status = 'blocked'::text);

CREATE INDEX todo_goal ON public.todo USING btree (goal_id, id);

CREATE INDEX todo_runnable ON public.todo USING btree (goal_id, priority, id) WHERE (status = 'open'::text);

CREATE INDEX turn_age ON public.turn USING brin (started_at);

CREATE INDEX turn_card_chat ON public.turn_card USING btree (receive_id, shown_at);

CREATE INDEX turn_card_work ON public.turn USING btree (id) WHERE (card_state <> 'done'::text);

CREATE INDEX turn_goal ON public.turn USING btree (goal_id, id DESC);

CREATE INDEX turn_note_turn ON public.turn_note USING btree (turn_id, id DESC);

CREATE UNIQUE INDEX turn_one_live ON public.turn USING btree (goal_id, agent_id) WHERE (state = 'live'::text);

CREATE INDEX turn_recent ON public.turn USING btree (goal_id, agent_id, id DESC);

CREATE INDEX turn_token_turn ON public.turn_token USING btree (turn_id);

CREATE INDEX unrouted_age ON public.unrouted USING brin (created_at);

CREATE INDEX web_session_age ON public.web_session USING btree (expires_at);

CREATE INDEX web_signin_age ON public.web_signin USING btree (created_at);

CREATE TRIGGER outbox_notify AFTER INSERT ON public.outbox REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.outbox_notify();

CREATE TRIGGER run_request_wake AFTER INSERT ON public.run_request FOR EACH ROW EXECUTE FUNCTION public.loopx_schedule_wake_goal();

CREATE TRIGGER schedule_sync_agent AFTER INSERT OR DELETE ON public.agent FOR EACH ROW EXECUTE FUNCTION public.loopx_schedule_sync_agent();

CREATE TRIGGER schedule_sync_goal AFTER INSERT OR UPDATE ON public.goal FOR EACH ROW EXECUTE FUNCTION public.loopx_schedule_sync_goal();

CREATE TRIGGER schedule_wake_gate AFTER UPDATE OF status ON public.gate FOR EACH ROW WHEN (((old.status = 'open'::text) AND (new.status <> 'open'::text))) EXECUTE FUNCTION public.loopx_schedule_wake();

CREATE TRIGGER schedule_wake_inbox AFTER INSERT ON public.inbox_item REFERENCING NEW TABLE AS new_items FOR EACH STATEMENT EXECUTE FUNCTION public.loopx_schedule_wake_items();

CREATE TRIGGER schedule_wake_todo AFTER INSERT ON public.todo FOR EACH ROW EXECUTE FUNCTION public.loopx_schedule_wake();

CREATE TRIGGER turn_card_wake AFTER INSERT OR UPDATE OF state, note_rev ON public.turn FOR EACH ROW WHEN ((new.card_state <> 'done'::text)) EXECUTE FUNCTION public.loopx_schedule_wake_goal();

CREATE TRIGGER workspace_agent AFTER INSERT OR DELETE OR UPDATE ON public.agent FOR EACH ROW EXECUTE FUNCTION public.loopx_workspace_notify();

CREATE TRIGGER workspace_gate AFTER INSERT OR UPDATE ON public.gate FOR EACH ROW EXECUTE FUNCTION public.loopx_workspace_notify();

CREATE TRIGGER workspace_goal AFTER INSERT OR UPDATE ON public.goal FOR EACH ROW EXECUTE FUNCTION public.loopx_workspace_notify_goal();

CREATE TRIGGER workspace_proposal AFTER INSERT OR UPDATE ON public.proposal FOR EACH ROW EXECUTE FUNCTION public.loopx_workspace_notify();

CREATE TRIGGER workspace_todo AFTER INSERT OR UPDATE ON public.todo FOR EACH ROW EXECUTE FUNCTION public.loopx_workspace_notify();

CREATE TRIGGER workspace_turn AFTER INSERT OR UPDATE OF state ON public.turn FOR EACH ROW EXECUTE FUNCTION public.loopx_workspace_notify();

ALTER TABLE ONLY public.agent
    ADD CONSTRAINT agent_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.agent_secret
    ADD CONSTRAINT agent_secret_goal_id_agent_id_fkey FOREIGN KEY (goal_id, agent_id) REFERENCES public.agent(goal_id, id) ON DELETE CASCADE;

ALTER TABLE ONLY public.attachment
    ADD CONSTRAINT attachment_evidence_id_fkey FOREIGN KEY (evidence_id) REFERENCES public.evidence(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.attachment
    ADD CONSTRAINT attachment_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.attachment
    ADD CONSTRAINT attachment_inbox_item_id_fkey FOREIGN KEY (inbox_item_id) REFERENCES public.inbox_item(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.attachment
    ADD CONSTRAINT attachment_reply_of_fkey FOREIGN KEY (reply_of) REFERENCES public.inbox_item(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.attachment
    ADD CONSTRAINT attachment_sha256_fkey FOREIGN KEY (sha256) REFERENCES public.file_blob(sha256);

ALTER TABLE ONLY public.binding
    ADD CONSTRAINT binding_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.criterion_waiver
    ADD CONSTRAINT criterion_waiver_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.criterion_waiver
    ADD CONSTRAINT criterion_waiver_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES public.todo(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.digest
    ADD CONSTRAINT digest_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.evidence
    ADD CONSTRAINT evidence_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.evidence
    ADD CONSTRAINT evidence_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES public.todo(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.evidence
    ADD CONSTRAINT evidence_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES public.turn(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.file_chunk
    ADD CONSTRAINT file_chunk_sha256_fkey FOREIGN KEY (sha256) REFERENCES public.file_blob(sha256) ON DELETE CASCADE;

ALTER TABLE ONLY public.gate
    ADD CONSTRAINT gate_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.gate
    ADD CONSTRAINT gate_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES public.todo(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.goal_decision
    ADD CONSTRAINT goal_decision_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.goal_decision
    ADD CONSTRAINT goal_decision_proposal_id_fkey FOREIGN KEY (proposal_id) REFERENCES public.proposal(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.handoff
    ADD CONSTRAINT handoff_gate_id_fkey FOREIGN KEY (gate_id) REFERENCES public.gate(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.handoff
    ADD CONSTRAINT handoff_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.handoff
    ADD CONSTRAINT handoff_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES public.todo(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.handoff
    ADD CONSTRAINT handoff_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES public.turn(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.hint_state
    ADD CONSTRAINT hint_state_goal_id_agent_id_fkey FOREIGN KEY (goal_id, agent_id) REFERENCES public.agent(goal_id, id) ON DELETE CASCADE;

ALTER TABLE ONLY public.inbox_item
    ADD CONSTRAINT inbox_item_goal_id_agent_id_fkey FOREIGN KEY (goal_id, agent_id) REFERENCES public.agent(goal_id, id) ON DELETE CASCADE;

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_update_of_fkey FOREIGN KEY (update_of) REFERENCES public.outbox(id);

ALTER TABLE ONLY public.permission_policy
    ADD CONSTRAINT permission_policy_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.proposal_card
    ADD CONSTRAINT proposal_card_outbox_id_fkey FOREIGN KEY (outbox_id) REFERENCES public.outbox(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.proposal_card
    ADD CONSTRAINT proposal_card_proposal_id_fkey FOREIGN KEY (proposal_id) REFERENCES public.proposal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.proposal
    ADD CONSTRAINT proposal_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.proposal
    ADD CONSTRAINT proposal_successor_id_fkey FOREIGN KEY (successor_id) REFERENCES public.proposal(id);

ALTER TABLE ONLY public.quota_ledger
    ADD CONSTRAINT quota_ledger_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.quota_ledger
    ADD CONSTRAINT quota_ledger_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES public.turn(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.run_request
    ADD CONSTRAINT run_request_goal_id_agent_id_fkey FOREIGN KEY (goal_id, agent_id) REFERENCES public.agent(goal_id, id) ON DELETE CASCADE;

ALTER TABLE ONLY public.schedule
    ADD CONSTRAINT schedule_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.tick
    ADD CONSTRAINT tick_schedule_id_fkey FOREIGN KEY (schedule_id) REFERENCES public.schedule(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.todo
    ADD CONSTRAINT todo_blocked_by_gate_fkey FOREIGN KEY (blocked_by_gate) REFERENCES public.gate(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.todo
    ADD CONSTRAINT todo_goal_id_fkey FOREIGN KEY (goal_id) REFERENCES public.goal(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.turn_card
    ADD CONSTRAINT turn_card_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES public.turn(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.turn
    ADD CONSTRAINT turn_goal_id_agent_id_fkey FOREIGN KEY (goal_id, agent_id) REFERENCES public.agent(goal_id, id) ON DELETE CASCADE;

ALTER TABLE ONLY public.turn_note
    ADD CONSTRAINT turn_note_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES public.turn(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.turn
    ADD CONSTRAINT turn_todo_id_fkey FOREIGN KEY (todo_id) REFERENCES public.todo(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.turn_token
    ADD CONSTRAINT turn_token_goal_id_agent_id_fkey FOREIGN KEY (goal_id, agent_id) REFERENCES public.agent(goal_id, id) ON DELETE CASCADE;

ALTER TABLE ONLY public.turn_token
    ADD CONSTRAINT turn_token_turn_id_fkey FOREIGN KEY (turn_id) REFERENCES public.turn(id) ON DELETE CASCADE;
