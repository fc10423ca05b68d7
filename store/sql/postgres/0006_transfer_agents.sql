-- PostgreSQL counterpart of store/sql/0006_transfer_agents.sql: the same tables, columns, constraints and indexes
-- (SQLite INTEGER -> BIGINT, TEXT -> TEXT, BLOB -> BYTEA; STRICT and WITHOUT ROWID have no
-- counterpart and need none: PostgreSQL columns are always typed).

-- A transfer becomes an agent: every transfer
-- records the principal that created it, and an active transfer is bound to the Agent identity
-- it became. Transfers written before this migration were created by the local operator (the
-- only creator before API keys owned transfers) and are bound to no agent.

-- The subject of the creating principal: 'operator:local' (CLI, stdio) or 'api-key:prn_…'.
-- The agent's owner is this subject's communication principal.
ALTER TABLE transfers ADD COLUMN owner_subject TEXT NOT NULL DEFAULT 'operator:local';

-- The agent the transfer became (set by the first binding, never changed after).
ALTER TABLE transfers ADD COLUMN agent_id TEXT REFERENCES agents (id);

-- One transfer per agent, and the agent → transfer lookup of a turn.
CREATE UNIQUE INDEX transfers_by_agent ON transfers (agent_id) WHERE agent_id IS NOT NULL;
-- Takeover rebinding pages through the bound active transfers by id.
CREATE INDEX transfers_bound_active ON transfers (id) WHERE status = 'active' AND agent_id IS NOT NULL;
