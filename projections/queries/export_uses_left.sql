-- Export downloads whose capability still allows downloads now (expiry
-- judged by capabilities_now), soonest to expire first.
SELECT o.id AS operation_id, o.export_id, c.id AS capability_id, c.uses, c.uses_claimed, c.uses_left, c.expires_at
FROM operations o
JOIN capabilities_now c ON c.operation_id = o.id AND c.decision_id = o.decision_id
WHERE o.kind = 'export-download' AND c.uses_left > 0
ORDER BY c.expires_at, o.id;
