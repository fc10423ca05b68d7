-- Delegation: agent tasks and their fenced attempts, agent waits (one-shot rendezvous over 1..8
-- task-terminal sources), goals, attention events, and the origin of every wake.
--
-- Conventions as in 0002: times are integer microseconds since the Unix epoch, principals are
-- SHA-256 digests, lifecycle strings are storage encodings of closed Rust enums (no CHECK lists
-- them; the store fails closed on a value it does not know).

-- 1. Wakes carry their origin. A wake may now be created by something other than a delivery (a
-- task attempt, an attention event, a wait), so `delivery_count` may be 0 (and the two delivery
-- orders are then 0). SQLite cannot relax a CHECK in place: the table is rebuilt. Its only child,
-- `wake_attempts`, is parked in a holding table first, so no foreign key ever points at a dropped
-- table (the migration runs inside one transaction with foreign keys on).
CREATE TABLE wakes_v2 (
    id                   TEXT PRIMARY KEY NOT NULL,            -- wk_…
    agent_id             TEXT NOT NULL REFERENCES agents (id),
    state                TEXT NOT NULL,                        -- pending|claimed|dispatched|consumed
    origin               TEXT NOT NULL DEFAULT 'message',      -- the first cause: message|agent_task_attempt|attention_event|wait
    origin_id            TEXT,                                 -- its task, attention event or wait id (NULL for message)
    delivery_count       INTEGER NOT NULL CHECK (delivery_count >= 0),
    first_delivery_order INTEGER NOT NULL,                     -- 0 while no delivery coalesced
    high_water_order     INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    dispatched_at        INTEGER,
    consumed_at          INTEGER
) STRICT;
INSERT INTO wakes_v2 (id, agent_id, state, origin, origin_id, delivery_count, first_delivery_order,
                      high_water_order, created_at, updated_at, dispatched_at, consumed_at)
SELECT id, agent_id, state, 'message', NULL, delivery_count, first_delivery_order,
       high_water_order, created_at, updated_at, dispatched_at, consumed_at
FROM wakes;

CREATE TABLE wake_attempts_hold AS SELECT * FROM wake_attempts;
DROP TABLE wake_attempts;
DROP TABLE wakes;
ALTER TABLE wakes_v2 RENAME TO wakes;
CREATE UNIQUE INDEX wakes_one_open ON wakes (agent_id) WHERE state IN ('pending', 'claimed');
CREATE INDEX wakes_by_agent ON wakes (agent_id, created_at);

CREATE TABLE wake_attempts (
    id                  TEXT PRIMARY KEY NOT NULL,             -- wka_…
    wake_id             TEXT NOT NULL REFERENCES wakes (id),
    agent_id            TEXT NOT NULL REFERENCES agents (id),
    endpoint_id         TEXT NOT NULL REFERENCES agent_endpoints (id),
    generation          INTEGER NOT NULL,
    state               TEXT NOT NULL,                         -- claimed|released|dispatched|accepted|delivery_unknown|consumed
    claim_expires_at    INTEGER NOT NULL,
    consume_token_hash  TEXT,
    claimed_at          INTEGER NOT NULL,
    dispatched_at       INTEGER,
    finished_at         INTEGER,
    kind                TEXT NOT NULL DEFAULT 'host',
    activation_key_hash TEXT
) STRICT;
INSERT INTO wake_attempts (id, wake_id, agent_id, endpoint_id, generation, state, claim_expires_at,
                           consume_token_hash, claimed_at, dispatched_at, finished_at, kind, activation_key_hash)
SELECT id, wake_id, agent_id, endpoint_id, generation, state, claim_expires_at,
       consume_token_hash, claimed_at, dispatched_at, finished_at, kind, activation_key_hash
FROM wake_attempts_hold;
DROP TABLE wake_attempts_hold;
CREATE INDEX wake_attempts_by_wake ON wake_attempts (wake_id);
CREATE INDEX wake_attempts_in_flight ON wake_attempts (endpoint_id) WHERE state IN ('claimed', 'dispatched');
CREATE UNIQUE INDEX wake_attempts_one_live ON wake_attempts (wake_id) WHERE state IN ('claimed', 'dispatched');
CREATE UNIQUE INDEX wake_attempts_by_activation ON wake_attempts (activation_key_hash)
    WHERE activation_key_hash IS NOT NULL;

-- Every non-message cause coalesced into a wake, in order. A wait fires once and an attention
-- event wakes once: the schema itself refuses a second cause for either.
CREATE TABLE wake_causes (
    id         INTEGER PRIMARY KEY,                            -- order of writing
    wake_id    TEXT NOT NULL REFERENCES wakes (id),
    origin     TEXT NOT NULL,                                  -- agent_task_attempt|attention_event|wait
    subject_id TEXT NOT NULL,                                  -- the task, attention event or wait
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX wake_causes_by_wake ON wake_causes (wake_id, id);
CREATE UNIQUE INDEX wake_causes_once ON wake_causes (origin, subject_id)
    WHERE origin IN ('wait', 'attention_event');

-- 2. Goals: a fixed completion intent, a bounded plan (JSON array of {title, status}) with
-- revision-fenced checkpoints, a lifecycle, and an optional controller agent.
CREATE TABLE goals (
    id                  TEXT PRIMARY KEY NOT NULL,             -- goal_…
    owner_principal     TEXT NOT NULL,
    creator_agent_id    TEXT REFERENCES agents (id),           -- NULL: the owner, as a human
    controller_agent_id TEXT REFERENCES agents (id),
    title               TEXT NOT NULL,
    completion_intent   TEXT NOT NULL,                         -- fixed at creation
    plan                TEXT NOT NULL,
    note                TEXT NOT NULL,                         -- the latest checkpoint's note
    revision            INTEGER NOT NULL CHECK (revision >= 1),
    state               TEXT NOT NULL,                         -- active|completed|abandoned
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    closed_at           INTEGER
) STRICT;
CREATE INDEX goals_by_owner ON goals (owner_principal, state, id);

-- 3. Agent tasks and their attempts.
CREATE TABLE agent_tasks (
    id                TEXT PRIMARY KEY NOT NULL,               -- tsk_…
    owner_principal   TEXT NOT NULL,
    creator_agent_id  TEXT REFERENCES agents (id),             -- NULL: the owner, as a human
    assignee_agent_id TEXT NOT NULL REFERENCES agents (id),
    goal_id           TEXT REFERENCES goals (id),
    title             TEXT NOT NULL,
    instructions      TEXT NOT NULL,
    state             TEXT NOT NULL,                           -- open|running|succeeded|failed|cancelled
    result            TEXT,                                    -- the finishing attempt's result
    attempt_count     INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    terminal_at       INTEGER
) STRICT;
CREATE INDEX agent_tasks_by_owner ON agent_tasks (owner_principal, id);
CREATE INDEX agent_tasks_by_assignee ON agent_tasks (assignee_agent_id, state);
CREATE INDEX agent_tasks_by_creator ON agent_tasks (creator_agent_id);
CREATE INDEX agent_tasks_by_goal ON agent_tasks (goal_id);

CREATE TABLE agent_task_attempts (
    id                TEXT PRIMARY KEY NOT NULL,               -- tka_…
    task_id           TEXT NOT NULL REFERENCES agent_tasks (id),
    number            INTEGER NOT NULL CHECK (number >= 1),
    assignee_agent_id TEXT NOT NULL REFERENCES agents (id),
    endpoint_id       TEXT NOT NULL REFERENCES agent_endpoints (id),  -- the fence: endpoint …
    generation        INTEGER NOT NULL,                               -- … and controller generation
    wake_id           TEXT NOT NULL REFERENCES wakes (id),
    state             TEXT NOT NULL,                           -- active|succeeded|failed|cancelled|revoked|delivery_unknown
    result            TEXT,
    started_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    UNIQUE (task_id, number)
) STRICT;
-- At most one active attempt per task.
CREATE UNIQUE INDEX agent_task_attempts_one_active ON agent_task_attempts (task_id) WHERE state = 'active';
CREATE INDEX agent_task_attempts_by_endpoint ON agent_task_attempts (endpoint_id) WHERE state = 'active';
CREATE INDEX agent_task_attempts_by_wake ON agent_task_attempts (wake_id) WHERE state = 'active';

-- 4. Agent waits: the agent to wake, 1..8 exact task sources, any|all, optionally Goal-scoped.
CREATE TABLE agent_waits (
    id              TEXT PRIMARY KEY NOT NULL,                 -- wait_…
    owner_principal TEXT NOT NULL,
    agent_id        TEXT NOT NULL REFERENCES agents (id),
    goal_id         TEXT REFERENCES goals (id),
    mode            TEXT NOT NULL,                             -- any|all
    state           TEXT NOT NULL,                             -- waiting|triggered|cancelled
    source_count    INTEGER NOT NULL CHECK (source_count BETWEEN 1 AND 8),
    wake_id         TEXT REFERENCES wakes (id),                -- the wake its firing coalesced into
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    triggered_at    INTEGER,
    cancelled_at    INTEGER
) STRICT;
CREATE INDEX agent_waits_by_agent ON agent_waits (agent_id, state);
CREATE INDEX agent_waits_by_owner ON agent_waits (owner_principal, id);

CREATE TABLE agent_wait_sources (
    wait_id    TEXT NOT NULL REFERENCES agent_waits (id),
    task_id    TEXT NOT NULL REFERENCES agent_tasks (id),
    position   INTEGER NOT NULL,
    matched_at INTEGER,                                        -- when the task's terminal fact reached it
    PRIMARY KEY (wait_id, task_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX agent_wait_sources_by_task ON agent_wait_sources (task_id);

-- 5. Attention: one immutable `agent_task_terminal` event per (terminal attempt, active goal).
CREATE TABLE attention_events (
    id              TEXT PRIMARY KEY NOT NULL,                 -- att_…
    owner_principal TEXT NOT NULL,
    kind            TEXT NOT NULL,                             -- agent_task_terminal
    goal_id         TEXT NOT NULL REFERENCES goals (id),
    task_id         TEXT NOT NULL REFERENCES agent_tasks (id),
    attempt_id      TEXT NOT NULL REFERENCES agent_task_attempts (id),
    task_state      TEXT NOT NULL,                             -- succeeded|failed
    target_agent_id TEXT REFERENCES agents (id),               -- NULL: a human creator, no wake
    wake_id         TEXT REFERENCES wakes (id),
    created_at      INTEGER NOT NULL,
    UNIQUE (kind, attempt_id, goal_id)
) STRICT;
CREATE INDEX attention_events_by_target ON attention_events (target_agent_id, created_at);
CREATE INDEX attention_events_by_owner ON attention_events (owner_principal, created_at);
