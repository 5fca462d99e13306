-- 002: events the projector could not fold, and the operations they leave
-- incomplete.
--
-- An event that cannot be decoded or folded is retried a bounded number of
-- times, then set aside (the set-aside store, role projector) and skipped:
-- the checkpoint moves past it so every later event is projected. Skipping
-- is never silent: the event is listed here, and its operation's row says
-- that it is incomplete. Only a rebuild folds a skipped event again.

-- operations.projection_incomplete: an event of this operation was skipped;
-- the operation's rows (and its executions', capabilities', deliveries')
-- may be missing what that event and the events after it said. Read the
-- stream (GET /v1/operations/{id}/events, opledger audit replay) for the
-- history.
ALTER TABLE operations ADD COLUMN projection_incomplete boolean NOT NULL DEFAULT false;

-- skipped_events: one row per event the projector read past without
-- folding it.
CREATE TABLE skipped_events (
    event_id     text COLLATE "C" PRIMARY KEY,
    event_seq    bigint      NOT NULL UNIQUE, -- order in the log, 1-based
    position     text        NOT NULL,        -- the event's global position
    stream_id    text COLLATE "C" NOT NULL,
    event_type   text        NOT NULL,
    operation_id text COLLATE "C",            -- NULL for the evidence stream
    reason       text        NOT NULL,        -- event.undecodable | event.unfoldable | event.follows-skipped
    detail       text,                        -- why, escaped and cut
    skipped_at   timestamptz NOT NULL         -- the projector's clock
);
CREATE INDEX skipped_events_operation_id_idx ON skipped_events (operation_id, event_seq);
