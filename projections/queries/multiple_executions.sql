-- Operations with more than one execution, with their executions. Every
-- execution but the last ended NotApplied (invariant 3): these are refunds
-- that took a new attempt. Index: operations_multiple_executions_idx.
SELECT o.id AS operation_id, o.state, o.execution_count,
       e.id AS execution_id, e.attempt, e.state AS execution_state, e.outcome, e.started_at
FROM operations o
JOIN executions e ON e.operation_id = o.id
WHERE o.execution_count > 1
ORDER BY o.id, e.attempt, e.id;
