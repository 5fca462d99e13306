-- 002: the hash chain through every stream (see package eventstore/chain).
--
-- Every event row carries the hash of its predecessor in its stream
-- (prev_hash; the chain's genesis value for version 0) and its own
-- (event_hash); the streams row carries the hash of the stream's last event
-- (head_hash), so that an append computes the next links from the row it
-- already writes first, in its one statement.
--
-- Rows written before this migration keep NULL in all three: they were
-- stored before hashing began, and the audit reports them as such (it never
-- treats a missing hash as a valid one). The first event appended to such a
-- stream links to the genesis value.

ALTER TABLE streams
    ADD COLUMN head_hash bytea CHECK (octet_length(head_hash) = 32);

ALTER TABLE events
    ADD COLUMN prev_hash  bytea CHECK (octet_length(prev_hash) = 32),
    ADD COLUMN event_hash bytea CHECK (octet_length(event_hash) = 32);
