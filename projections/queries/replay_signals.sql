-- Replay signals in the last 24 hours, by presenting message: spent
-- authority presented on a message id its operation had not seen.
-- Index: evidence_replay_idx.
SELECT message_id,
       count(*) AS signals,
       count(DISTINCT capability_id) AS capabilities,
       count(DISTINCT operation_id) AS operations,
       min(recorded_at) AS first_at,
       max(recorded_at) AS last_at
FROM evidence
WHERE replay_suspected
  AND recorded_at >= now() - interval '24 hours'
GROUP BY message_id
ORDER BY signals DESC, message_id;
