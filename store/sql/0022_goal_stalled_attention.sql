-- Goal workflow continuity (the conversation seed's G4): the second attention kind,
-- `goal_workflow_stalled`, which the Goal Plan card's observations let the server record
-- (store/src/conversation/delegation/stall.rs).
--
-- On the goal, the card's observation run, never anything it says about time: the server's
-- clock when an uninterrupted run of observations began, and when the last one came.
ALTER TABLE goals ADD COLUMN observed_since INTEGER;
ALTER TABLE goals ADD COLUMN observed_at INTEGER;

-- A stalled attention has no task, attempt or task state; it is bound to the goal's last
-- meaningful-work epoch instead, one per epoch. SQLite cannot drop a NOT NULL in place: the
-- table is rebuilt (nothing refers to it).
CREATE TABLE attention_events_v2 (
    id              TEXT PRIMARY KEY NOT NULL,                 -- att_…
    owner_principal TEXT NOT NULL,
    kind            TEXT NOT NULL,                             -- agent_task_terminal|goal_workflow_stalled
    goal_id         TEXT NOT NULL REFERENCES goals (id),
    task_id         TEXT REFERENCES agent_tasks (id),          -- a terminal attention's
    attempt_id      TEXT REFERENCES agent_task_attempts (id),  -- a terminal attention's
    task_state      TEXT,                                      -- a terminal attention's: succeeded|failed
    epoch           INTEGER,                                   -- a stalled attention's: the last meaningful work
    target_agent_id TEXT REFERENCES agents (id),               -- NULL: a human creator, no wake
    wake_id         TEXT REFERENCES wakes (id),
    created_at      INTEGER NOT NULL,
    seq             INTEGER NOT NULL DEFAULT 0,
    UNIQUE (kind, attempt_id, goal_id)
) STRICT;
INSERT INTO attention_events_v2 (id, owner_principal, kind, goal_id, task_id, attempt_id, task_state, target_agent_id,
                                 wake_id, created_at, seq)
SELECT id, owner_principal, kind, goal_id, task_id, attempt_id, task_state, target_agent_id, wake_id, created_at, seq
FROM attention_events;
DROP TABLE attention_events;
ALTER TABLE attention_events_v2 RENAME TO attention_events;
CREATE INDEX attention_events_by_target ON attention_events (target_agent_id, created_at);
CREATE UNIQUE INDEX attention_events_by_owner ON attention_events (owner_principal, seq);
-- One stalled attention per goal and epoch: only new meaningful work opens another.
CREATE UNIQUE INDEX attention_events_one_stall ON attention_events (goal_id, epoch) WHERE kind = 'goal_workflow_stalled';
