-- 003: indexes for the query API's searches (projections.Reads): the
-- console and the HTTP API find operations by any id a person holds, and
-- list them newest first within a state.
--
-- Indexes only: no table or column changes, so analysts' SQL is unaffected.

-- Search by order and by correlation id (an order may have several refund
-- operations; a correlation groups one story).
CREATE INDEX operations_order_id_idx ON operations (order_id);
CREATE INDEX operations_correlation_id_idx ON operations (correlation_id);
-- Operations of a state, newest first, keyset paged on (created_at, id).
CREATE INDEX operations_state_created_idx ON operations (state, created_at DESC, id DESC);
-- All operations newest first, keyset paged on (created_at, id).
CREATE INDEX operations_created_id_idx ON operations (created_at DESC, id DESC);
