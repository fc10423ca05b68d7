-- The conversation domain's audit log, explicit wake activation, and idempotency retention.
--
-- `communication_events` records what happened (agent created, endpoint attached, message
-- posted, wake dispatched, …) with ids, seqs and counts only: never a message body, an agent
-- description or specialty label, an idempotency key or a consume token. Each row is written in
-- the transaction of the change it records.
CREATE TABLE communication_events (
    id              INTEGER PRIMARY KEY,                       -- order of writing
    at              INTEGER NOT NULL,                          -- microseconds since the epoch
    kind            TEXT NOT NULL,                             -- agent_created, message_posted, …
    agent_id        TEXT,
    conversation_id TEXT,
    detail          TEXT NOT NULL                              -- small JSON object of ids and counts
) STRICT;
CREATE INDEX communication_events_by_agent ON communication_events (agent_id, id);
CREATE INDEX communication_events_by_conversation ON communication_events (conversation_id, id);

-- How an attempt came to be: claimed by a host carrier, or accepted by an already-running turn
-- through bootstrap's explicit activation (which crosses the fence at once). An explicit
-- activation keeps the hash of its activation key, so an exact retry finds the same attempt.
ALTER TABLE wake_attempts ADD COLUMN kind TEXT NOT NULL DEFAULT 'host';
ALTER TABLE wake_attempts ADD COLUMN activation_key_hash TEXT;
CREATE UNIQUE INDEX wake_attempts_by_activation ON wake_attempts (activation_key_hash)
    WHERE activation_key_hash IS NOT NULL;

-- The lease an endpoint was attached with, so that an agent-acting call can renew it by as much
-- (NULL for endpoints attached before this migration: they renew by the longest lease's half).
ALTER TABLE agent_endpoints ADD COLUMN lease_micros INTEGER;

-- Retention: records older than the retention period are pruned per principal on its writes.
CREATE INDEX communication_idempotency_by_age ON communication_idempotency (principal, created_at);
