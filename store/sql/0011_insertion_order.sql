-- Insertion order, made explicit so that it is the same on every backend: a wake's `seq` counts
-- its agent's wakes (1, 2, …), an attempt's `seq` counts its wake's attempts. Lists that were
-- ordered by SQLite's rowid (an agent's wakes newest first, a wake's attempts oldest first)
-- order by these instead; PostgreSQL has no rowid, and timestamps tie within a microsecond.
-- Each is assigned as max + 1 inside the inserting write transaction.
ALTER TABLE wakes ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE wakes SET seq = r.n
FROM (SELECT rowid AS rid, row_number() OVER (PARTITION BY agent_id ORDER BY rowid) AS n FROM wakes) AS r
WHERE wakes.rowid = r.rid;
CREATE INDEX wakes_by_agent_seq ON wakes (agent_id, seq);

ALTER TABLE wake_attempts ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE wake_attempts SET seq = r.n
FROM (SELECT rowid AS rid, row_number() OVER (PARTITION BY wake_id ORDER BY rowid) AS n FROM wake_attempts) AS r
WHERE wake_attempts.rowid = r.rid;
CREATE INDEX wake_attempts_by_wake_seq ON wake_attempts (wake_id, seq);
