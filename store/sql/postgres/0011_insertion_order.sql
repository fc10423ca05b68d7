-- PostgreSQL counterpart of store/sql/0011_insertion_order.sql: the same columns and indexes.
-- Rows written before it are numbered by (created_at, id) here (there is no rowid to follow).
ALTER TABLE wakes ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE wakes SET seq = r.n
FROM (SELECT id, row_number() OVER (PARTITION BY agent_id ORDER BY created_at, id) AS n FROM wakes) AS r
WHERE wakes.id = r.id;
CREATE INDEX wakes_by_agent_seq ON wakes (agent_id, seq);

ALTER TABLE wake_attempts ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE wake_attempts SET seq = r.n
FROM (SELECT id, row_number() OVER (PARTITION BY wake_id ORDER BY claimed_at, id) AS n FROM wake_attempts) AS r
WHERE wake_attempts.id = r.id;
CREATE INDEX wake_attempts_by_wake_seq ON wake_attempts (wake_id, seq);
