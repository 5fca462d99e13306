-- 004: operation kinds and authority of bounded use.
--
-- An operation has a kind: 'refund' (every operation before this migration)
-- or 'export-download' (a download of a generated export, which a
-- capability of N uses lets happen up to N times). A refund's columns
-- (order_id, amount_minor, currency) are NULL for another kind; an export
-- download names its export_id. Capabilities count their uses: uses is
-- what the capability was issued with (1 for a refund), uses_claimed how
-- many claims it had, uses_left how many it still allows (0 once consumed
-- or revoked; expiry is judged at query time, see capabilities_now).
-- executions.use is which use of its capability an execution is.

ALTER TABLE operations ADD COLUMN kind text NOT NULL DEFAULT 'refund';
ALTER TABLE operations ADD COLUMN export_id text;
ALTER TABLE operations ALTER COLUMN order_id DROP NOT NULL;
ALTER TABLE operations ALTER COLUMN amount_minor DROP NOT NULL;
ALTER TABLE operations ALTER COLUMN currency DROP NOT NULL;
-- operations.uses_left: the uses left across the capabilities issued under
-- the latest decision (expiry not judged: see capabilities_now).
ALTER TABLE operations ADD COLUMN uses_left integer NOT NULL DEFAULT 0 CHECK (uses_left >= 0);

ALTER TABLE capabilities ADD COLUMN uses integer NOT NULL DEFAULT 1 CHECK (uses >= 1);
ALTER TABLE capabilities ADD COLUMN uses_claimed integer NOT NULL DEFAULT 0 CHECK (uses_claimed >= 0);
ALTER TABLE capabilities ADD COLUMN uses_left integer NOT NULL DEFAULT 0 CHECK (uses_left >= 0);
UPDATE capabilities SET uses_claimed = 1 WHERE state = 'Consumed';
UPDATE capabilities SET uses_left = 1 WHERE state = 'Issued';
UPDATE operations o SET uses_left = c.left_total
FROM (SELECT operation_id, decision_id, sum(uses_left)::integer AS left_total FROM capabilities GROUP BY operation_id, decision_id) c
WHERE c.operation_id = o.id AND c.decision_id = o.decision_id;

ALTER TABLE executions ADD COLUMN use integer NOT NULL DEFAULT 1 CHECK (use >= 1);

-- capabilities_now gains the use counts, uses_left 0 for an Expired one.
CREATE OR REPLACE VIEW capabilities_now AS
SELECT id, operation_id, decision_id, attempt,
       CASE WHEN state = 'Issued' AND expires_at <= now() THEN 'Expired' ELSE state END AS state,
       issued_at, expires_at, consumed_by_message_id, consumed_at, execution_id,
       revoked_at, revoke_reason, revoked_by,
       uses, uses_claimed,
       CASE WHEN state = 'Issued' AND expires_at <= now() THEN 0 ELSE uses_left END AS uses_left
FROM capabilities;

-- Export downloads by kind and day, beside refunds.
CREATE INDEX operations_kind_created_at_idx ON operations (kind, created_at) WHERE kind <> 'refund';
