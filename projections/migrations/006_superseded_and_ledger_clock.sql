-- 006: a superseded capability, and expiry judged by the ledger's clock.
--
-- A capability whose decision a later decision of its operation superseded
-- can never be claimed again (the ledger refuses it as
-- capability.superseded): its state reads 'Superseded' with no use left,
-- not 'Issued'.
--
-- projection_checkpoints.clock_offset is the ledger's clock minus the
-- database's, as the projector measured it at its latest batch (its clock
-- is the ledger's: serve's, with any test-clock advance; a simulation's).
-- capabilities_now judges expiry at now() + clock_offset: the ledger's time,
-- not the database server's.

UPDATE capabilities c SET state = 'Superseded', uses_left = 0
FROM operations o
WHERE o.id = c.operation_id AND c.state = 'Issued' AND c.decision_id <> o.decision_id;

ALTER TABLE projection_checkpoints ADD COLUMN clock_offset interval NOT NULL DEFAULT interval '0';

CREATE OR REPLACE VIEW capabilities_now AS
WITH ledger AS (
    SELECT now() + coalesce((SELECT clock_offset FROM projection_checkpoints ORDER BY updated_at DESC LIMIT 1), interval '0') AS now
)
SELECT c.id, c.operation_id, c.decision_id, c.attempt,
       CASE WHEN c.state = 'Issued' AND c.expires_at <= ledger.now THEN 'Expired' ELSE c.state END AS state,
       c.issued_at, c.expires_at, c.consumed_by_message_id, c.consumed_at, c.execution_id,
       c.revoked_at, c.revoke_reason, c.revoked_by,
       c.uses, c.uses_claimed,
       CASE WHEN c.state = 'Issued' AND c.expires_at <= ledger.now THEN 0 ELSE c.uses_left END AS uses_left
FROM capabilities c CROSS JOIN ledger;
