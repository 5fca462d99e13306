-- 003: retries that are not the message's fault. attempts counts claims (it
-- also fences settles: a settle names the attempt it claimed); uncounted
-- counts the claims that ended in an outage of the ledger's store (the
-- worker could record nothing because the store was unavailable). A message
-- is dead-lettered once attempts - uncounted reaches the queue's
-- MaxAttempts, so a database restart never dead-letters healthy messages.
ALTER TABLE messages ADD COLUMN uncounted integer NOT NULL DEFAULT 0 CHECK (uncounted >= 0);
