-- 003: snapshots of folded stream states (eventstore.SnapshotStore).
--
-- Derived data, never the source of truth: a row says what stream_id folds
-- into at version (whose event carries event_hash), in a format named by
-- its reader (the command handler). A reader checks the row against the
-- event at that version and folds the events after it; a row that does not
-- match is ignored. Deleting any or all rows is always safe: they are
-- rebuilt from the events when a long stream is next loaded.
CREATE TABLE snapshots (
    stream_id  text        PRIMARY KEY,
    version    bigint      NOT NULL CHECK (version >= 0),
    event_hash bytea       NOT NULL CHECK (octet_length(event_hash) = 32),
    format     text        NOT NULL,
    state      bytea       NOT NULL,
    saved_at   timestamptz NOT NULL DEFAULT now()
);
