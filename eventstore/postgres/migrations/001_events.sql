-- 001: the event log and the per-stream version table.
--
-- Migrate runs this with search_path set to the configured schema, so names
-- are unqualified here.

-- streams holds each stream's current version (0-based: the version of its
-- last event). Its row is the first thing every append writes, so appends to
-- one stream serialize on it and take transaction ids in version order.
CREATE TABLE streams (
    stream_id text   PRIMARY KEY,
    version   bigint NOT NULL CHECK (version >= 0)
);

-- events is the global log. Readers order it by (transaction_id,
-- global_position) and only read rows whose transaction_id is below the xmin
-- of their snapshot, so no row can still appear before their checkpoint.
CREATE TABLE events (
    global_position bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transaction_id  xid8        NOT NULL DEFAULT pg_current_xact_id(),
    stream_id       text        NOT NULL,
    stream_version  bigint      NOT NULL CHECK (stream_version >= 0),
    event_id        uuid        NOT NULL UNIQUE,
    event_type      text        NOT NULL,
    data            jsonb,
    metadata        jsonb,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (stream_id, stream_version)
);

CREATE INDEX events_transaction_id_global_position_idx ON events (transaction_id, global_position);
