-- 007: what the console's pictures of the last hour and day read.
--
-- executions_unknown_ended_idx: executions that were ever Unknown, by when
-- they ended (reconciled, resolved, or a late outcome), so that how many
-- were Unknown or Escalated at each moment of a window is read from those
-- still open (the Unknown and Escalated indexes of 001) and those that
-- ended within the window, not from every execution.
CREATE INDEX executions_unknown_ended_idx ON executions (ended_at) WHERE unknown_since IS NOT NULL;

-- lag_samples: how far the projector and each relay trailed the log, one
-- row per source and minute of the ledger's clock, written by serve (every
-- instance tries each minute; the first row of a minute stays). Kept for
-- 25 hours: serve deletes older rows as it writes. A rebuild's swap starts
-- it afresh (the table is part of the read models' schema).
CREATE TABLE lag_samples (
    source    text COLLATE "C" NOT NULL,  -- projector | relay:<name>
    at        timestamptz NOT NULL,       -- the minute, truncated
    events    bigint      NOT NULL CHECK (events >= 0),
    capped    boolean     NOT NULL,       -- more events than were counted
    behind_ms bigint      NOT NULL CHECK (behind_ms >= 0),
    PRIMARY KEY (source, at)
);
CREATE INDEX lag_samples_at_idx ON lag_samples (at);
