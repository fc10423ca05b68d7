-- Goal workflow continuity (the conversation seed's G4): the second attention kind,
-- `goal_workflow_stalled`, which the Goal Plan card's observations let the server record
-- (store/src/conversation/delegation/stall.rs).
--
-- On the goal, the card's observation run, never anything it says about time: the server's
-- clock when an uninterrupted run of observations began, and when the last one came.
ALTER TABLE goals ADD COLUMN observed_since BIGINT;
ALTER TABLE goals ADD COLUMN observed_at BIGINT;

-- A stalled attention has no task, attempt or task state; it is bound to the goal's last
-- meaningful-work epoch instead, one per epoch.
ALTER TABLE attention_events ALTER COLUMN task_id DROP NOT NULL;
ALTER TABLE attention_events ALTER COLUMN attempt_id DROP NOT NULL;
ALTER TABLE attention_events ALTER COLUMN task_state DROP NOT NULL;
ALTER TABLE attention_events ADD COLUMN epoch BIGINT;
-- One stalled attention per goal and epoch: only new meaningful work opens another.
CREATE UNIQUE INDEX attention_events_one_stall ON attention_events (goal_id, epoch) WHERE kind = 'goal_workflow_stalled';
