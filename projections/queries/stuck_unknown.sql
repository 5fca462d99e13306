-- Operations stuck in Unknown for more than an hour, oldest first: the
-- reconciler has not turned them into facts. Escalated executions are a
-- person's queue and are not listed. Index: executions_unknown_since_idx.
SELECT o.id AS operation_id, o.order_id, o.amount_minor, o.currency,
       e.id AS execution_id, e.unknown_since, e.unknown_cause,
       now() - e.unknown_since AS stuck_for
FROM executions e
JOIN operations o ON o.id = e.operation_id
WHERE e.state = 'Unknown'
  AND e.unknown_since < now() - interval '1 hour'
ORDER BY e.unknown_since, e.id;
