-- 004: the console's sessions (adapters/console: PostgresSessions). A
-- session cookie is honoured only while its row is here, not ended and not
-- expired, so a sign-out, an operator ending a token's sessions, or a lost
-- row ends it on every serve instance at once. token_digest is the SHA-256
-- of the bearer token the session was opened with (never the token).
-- Expired rows are deleted, a bounded batch at each sign-in.
CREATE TABLE console_sessions (
    id           text COLLATE "C" PRIMARY KEY,
    token_digest text COLLATE "C" NOT NULL,
    principal    text        NOT NULL,
    role         text        NOT NULL,
    issued_at    timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    ended_at     timestamptz,
    ended_by     text
);
CREATE INDEX console_sessions_token_idx ON console_sessions (token_digest) WHERE ended_at IS NULL;
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);
