-- 005: evidence is bounded and counted; evidence names its principal.
--
-- Past the evidence bound (domain.EvidenceBound: 16 refusals per key and
-- 256 per evidence stream, per hour, recorded one by one), refusals are
-- counted into RefusalsSummarized events. Each becomes one evidence row of
-- that kind whose count is the refusals it counts (every other row counts
-- one), so sum(count) accounts for every refusal; summary holds the
-- summary as the event states it (window, bounds, reasons, principals,
-- samples). actor is who caused the evidence: the authenticated principal
-- (the token's name) of the request, where worker is the worker label the
-- caller gave (worker_id).

ALTER TABLE evidence ADD COLUMN count bigint NOT NULL DEFAULT 1 CHECK (count >= 1);
ALTER TABLE evidence ADD COLUMN actor text;
ALTER TABLE evidence ADD COLUMN summary jsonb;
