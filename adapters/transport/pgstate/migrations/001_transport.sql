-- The transport's state in Postgres: where each relay stands in the log, the
-- Postgres-only queue (topics in one table), and resubmitted dead letters.
-- Migrate runs this with search_path set to the transport schema.

-- One row per relay: the text of the eventstore position of the last event
-- it published (a compound "transaction/global" position on Postgres).
CREATE TABLE relay_checkpoints (
    name       text        PRIMARY KEY,
    position   text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The Postgres-only transport: one row per message of every topic. A row is
-- 'ready' until acknowledged ('acked') or dead-lettered ('dead'); a dead
-- letter that an operator resubmitted becomes 'resubmitted' and its copy is a
-- new 'ready' row under a new message id. attempts counts claims;
-- visible_at is when the row may be claimed (again): a claim pushes it out by
-- the visibility timeout, so a worker that dies mid-message gives it back.
CREATE TABLE messages (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic       text        NOT NULL,
    message_id  text        NOT NULL,
    key         text        NOT NULL,
    value       bytea       NOT NULL,
    headers     jsonb       NOT NULL DEFAULT '{}',
    state       text        NOT NULL DEFAULT 'ready'
                            CHECK (state IN ('ready', 'acked', 'dead', 'resubmitted')),
    attempts    integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    visible_at  timestamptz NOT NULL DEFAULT now(),
    claimed_by  text,
    last_error  text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    settled_at  timestamptz,
    dead_reason text,
    dead_detail text,
    CONSTRAINT messages_topic_message_id UNIQUE (topic, message_id)
);

-- Claiming walks ready rows of a topic in id order ...
CREATE INDEX messages_ready ON messages (topic, id) WHERE state = 'ready';
-- ... and checks that no earlier ready row holds the same key (order per key).
CREATE INDEX messages_ready_key ON messages (topic, key, id) WHERE state = 'ready';
-- The dead-letter queue.
CREATE INDEX messages_dead ON messages (topic, id) WHERE state IN ('dead', 'resubmitted');

-- Resubmitted dead letters, whichever queue held them. A row is written
-- before the copy is published (published = false) and marked after, so an
-- interrupted resubmission is completed under the same new message id.
CREATE TABLE resubmissions (
    dead_letter_id text        PRIMARY KEY,
    message_id     text        NOT NULL UNIQUE,
    resubmitted_by text        NOT NULL,
    resubmitted_at timestamptz NOT NULL DEFAULT now(),
    published      boolean     NOT NULL DEFAULT false
);
