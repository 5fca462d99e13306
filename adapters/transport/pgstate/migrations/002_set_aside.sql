-- 002: items a loop set aside (see domain/setaside). One row per failing item
-- of a role (sweeper, reconciler, projector, relay, queue, kafka, ...):
-- attempts counts failures since the last success or release; retry_at is
-- when it may be tried again; set_aside_at is set once attempts reached the
-- loop's bound, after which no loop retries it until an operator releases it
-- (the row is deleted). It lives in the transport schema because a
-- projection rebuild replaces the read-model schema and must not forget it.
CREATE TABLE set_aside (
    role            text        NOT NULL,
    item            text        NOT NULL,
    operation_id    text,
    reason          text        NOT NULL,
    detail          text        NOT NULL DEFAULT '',
    attempts        integer     NOT NULL CHECK (attempts >= 1),
    first_failed_at timestamptz NOT NULL,
    last_failed_at  timestamptz NOT NULL,
    retry_at        timestamptz NOT NULL,
    set_aside_at    timestamptz,
    PRIMARY KEY (role, item)
);

-- Listing pages by (first_failed_at, role, item).
CREATE INDEX set_aside_listing ON set_aside (first_failed_at, role, item);
