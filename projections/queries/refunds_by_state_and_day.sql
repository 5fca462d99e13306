-- Refunds requested in the last 30 days by UTC day, state and currency.
-- Index: operations_created_at_idx (index-only). Another kind of operation
-- (an export download) has no currency: the filter leaves it out.
SELECT (created_at AT TIME ZONE 'UTC')::date AS day, state, currency,
       count(*) AS refunds,
       sum(amount_minor) AS amount_minor
FROM operations
WHERE created_at >= now() - interval '30 days' AND currency IS NOT NULL
GROUP BY day, state, currency
ORDER BY day, state, currency;
