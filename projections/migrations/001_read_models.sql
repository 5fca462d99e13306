-- 001: the read models fed from the global log.
--
-- Migrate runs this with search_path set to the configured schema (opledger
-- by default), so names are unqualified here. Table and column names are a
-- public interface: analysts write SQL against them. Never rename one; add.
--
-- Identifiers are text COLLATE "C": they compare byte for byte (as Go does)
-- and index faster than under a linguistic collation. Absent values are NULL.
-- Timestamps are the ledger's own times as the events state them (the
-- handler's clock), except evidence.stored_at (the store's clock).

-- projection_checkpoints holds, per projection, the position in the global
-- log of the last event folded into this schema. It is written in the same
-- transaction as the rows that event produced.
CREATE TABLE projection_checkpoints (
    name           text COLLATE "C" PRIMARY KEY,
    position       text,                         -- the store's Position.String(); NULL: the start of the log
    events_applied bigint      NOT NULL DEFAULT 0 CHECK (events_applied >= 0),
    updated_at     timestamptz NOT NULL
);

-- operations: one row per operation stream.
CREATE TABLE operations (
    id                   text COLLATE "C" PRIMARY KEY,
    order_id             text        NOT NULL,
    amount_minor         bigint      NOT NULL,
    currency             text        NOT NULL,
    order_total_minor    bigint,
    correlation_id       text COLLATE "C" NOT NULL,
    requested_by         text,
    state                text        NOT NULL,  -- Requested Denied Authorized Executing Unknown Escalated Completed NotApplied
    attempt              integer     NOT NULL,  -- the latest decision's attempt; 0 before any decision
    decision_id          text COLLATE "C",      -- the latest decision
    verdict              text,                  -- Allowed | Denied, of the latest decision
    current_execution_id text COLLATE "C",      -- the latest execution
    execution_count      integer     NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    version              bigint      NOT NULL,  -- the stream version this row reflects
    last_event_seq       bigint      NOT NULL
);

-- executions: one row per claimed attempt.
CREATE TABLE executions (
    id                 text COLLATE "C" PRIMARY KEY,
    operation_id       text COLLATE "C" NOT NULL,
    capability_id      text COLLATE "C" NOT NULL,
    message_id         text COLLATE "C" NOT NULL,
    worker_id          text,                    -- the lease owner
    attempt            integer     NOT NULL,
    state              text        NOT NULL,    -- Executing Completed NotApplied Unknown Escalated
    lease_epoch        bigint      NOT NULL,
    lease_expires_at   timestamptz NOT NULL,
    idempotency_key    text        NOT NULL,
    outcome            text,                    -- Completed | NotApplied once definite
    outcome_source     text,                    -- executor | late-outcome | reconciliation
    provider_reference text,
    started_at         timestamptz NOT NULL,
    ended_at           timestamptz,
    unknown_since      timestamptz,             -- when it last became Unknown
    unknown_cause      text,
    escalated_at       timestamptz,
    escalation_reason  text,
    escalation_detail  text,
    last_event_seq     bigint      NOT NULL
);

-- capabilities: one row per issued capability. state is what events made it
-- (Issued, Consumed, Revoked); Expired is derived at query time by the view
-- capabilities_now below, never stored.
CREATE TABLE capabilities (
    id                     text COLLATE "C" PRIMARY KEY,
    operation_id           text COLLATE "C" NOT NULL,
    decision_id            text COLLATE "C" NOT NULL,
    attempt                integer     NOT NULL,
    state                  text        NOT NULL, -- Issued Consumed Revoked
    issued_at              timestamptz NOT NULL,
    expires_at             timestamptz NOT NULL,
    consumed_by_message_id text COLLATE "C",
    consumed_at            timestamptz,
    execution_id           text COLLATE "C",
    revoked_at             timestamptz,
    revoke_reason          text,
    revoked_by             text,
    last_event_seq         bigint      NOT NULL
);

-- capabilities_now is capabilities with state as it stands at the moment the
-- query runs: an Issued capability whose expires_at is not after now() is
-- Expired (the model's rule: a presentation at or after the expiry fails).
-- For another instant, filter capabilities on expires_at yourself.
CREATE VIEW capabilities_now AS
SELECT id, operation_id, decision_id, attempt,
       CASE WHEN state = 'Issued' AND expires_at <= now() THEN 'Expired' ELSE state END AS state,
       issued_at, expires_at, consumed_by_message_id, consumed_at, execution_id,
       revoked_at, revoke_reason, revoked_by
FROM capabilities;

-- deliveries: one row per message presented to an operation (the operation
-- the message named, which may not exist: see evidence).
CREATE TABLE deliveries (
    message_id     text COLLATE "C" NOT NULL,
    operation_id   text COLLATE "C" NOT NULL,
    first_seen_at  timestamptz NOT NULL,
    last_seen_at   timestamptz NOT NULL,
    times_seen     bigint      NOT NULL CHECK (times_seen >= 1),
    result         text        NOT NULL,  -- ClaimStatus of the first presentation
    reason         text,                  -- its reason code; NULL when Claimed
    capability_id  text COLLATE "C",      -- the capability it first presented
    last_event_seq bigint      NOT NULL,
    PRIMARY KEY (message_id, operation_id)
);

-- evidence: every refused presentation (from operation streams and from the
-- unattributed evidence stream), duplicate delivery and refused write.
CREATE TABLE evidence (
    event_id            text COLLATE "C" PRIMARY KEY,
    event_seq           bigint      NOT NULL UNIQUE, -- order in the log, 1-based
    position            text        NOT NULL,        -- the event's global position
    stream_id           text COLLATE "C" NOT NULL,
    kind                text        NOT NULL,        -- PresentationRejected | DeliveryDuplicated | WriteRefused
    recorded_at         timestamptz NOT NULL,        -- when the ledger recorded it (its clock)
    stored_at           timestamptz NOT NULL,        -- the store's clock at append
    operation_id        text COLLATE "C",
    message_id          text COLLATE "C",
    capability_id       text COLLATE "C",
    execution_id        text COLLATE "C",
    execution_state     text,                        -- DeliveryDuplicated: the execution's state then
    worker              text,
    status              text,                        -- ClaimStatus; NULL for WriteRefused
    reason              text        NOT NULL,
    execution_attempted boolean,                     -- false for presentations; NULL for WriteRefused
    replay_suspected    boolean     NOT NULL,
    detail              text,
    command             text,                        -- WriteRefused: the refused command
    lease_epoch         bigint,                      -- WriteRefused: the epoch the writer held
    current_epoch       bigint,                      -- WriteRefused: the execution's epoch then
    outcome             text,                        -- WriteRefused: what the writer tried to record
    provider_reference  text
);

-- reconciliations: how Unknown executions were resolved or handed to a
-- person: Reconciled, Escalated and LateOutcomeRecorded events.
CREATE TABLE reconciliations (
    event_id           text COLLATE "C" PRIMARY KEY,
    event_seq          bigint      NOT NULL UNIQUE,
    kind               text        NOT NULL, -- Reconciled | Escalated | LateOutcomeRecorded
    execution_id       text COLLATE "C" NOT NULL,
    operation_id       text COLLATE "C" NOT NULL,
    outcome            text,                 -- Completed | NotApplied; NULL for Escalated
    method             text,                 -- Reconciled: provider-lookup | provider-resend | operator
    provider_reference text,
    actor              text,
    evidence           text,
    reason             text,                 -- Escalated
    detail             text,                 -- Escalated, LateOutcomeRecorded
    at                 timestamptz NOT NULL
);

-- The sweeper: Executing executions by lease expiry.
CREATE INDEX executions_executing_lease_idx ON executions (lease_expires_at, id) WHERE state = 'Executing';
-- The reconciler, and operations stuck in Unknown: Unknown executions by age.
CREATE INDEX executions_unknown_since_idx ON executions (unknown_since, id) WHERE state = 'Unknown';
-- A person's queue: Escalated executions by when they were escalated.
CREATE INDEX executions_escalated_at_idx ON executions (escalated_at, id) WHERE state = 'Escalated';
-- Executions of one operation (the projector loads them per batch).
CREATE INDEX executions_operation_id_idx ON executions (operation_id);
CREATE INDEX capabilities_operation_id_idx ON capabilities (operation_id);
CREATE INDEX deliveries_operation_id_idx ON deliveries (operation_id);
-- Operations with more than one execution.
CREATE INDEX operations_multiple_executions_idx ON operations (id) INCLUDE (execution_count) WHERE execution_count > 1;
-- Refunds by state and day (index-only over a date range).
CREATE INDEX operations_created_at_idx ON operations (created_at) INCLUDE (state, currency, amount_minor);
-- Replay signals in a time window, by presenting message.
CREATE INDEX evidence_replay_idx ON evidence (recorded_at) INCLUDE (message_id) WHERE replay_suspected;
-- Evidence of one operation, and of one message.
CREATE INDEX evidence_operation_id_idx ON evidence (operation_id, event_seq);
CREATE INDEX evidence_message_id_idx ON evidence (message_id, event_seq);
CREATE INDEX reconciliations_execution_id_idx ON reconciliations (execution_id, event_seq);
