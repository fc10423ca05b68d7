-- PostgreSQL counterpart of store/sql/0015_agent_counts.sql: the same tables and columns.
--
-- How many agents the store holds, kept by every insert: the store-wide ceiling (`MAX_AGENTS`)
-- is one row read and written, not a count over a million agents on every insert.
CREATE TABLE agent_total (                                 -- exactly one row
    agents BIGINT NOT NULL CHECK (agents >= 0)
);
INSERT INTO agent_total (agents) SELECT count(*) FROM agents;

-- How many agents each principal made with `create_agent` (agents transfers became are not
-- counted: transfers bound them), kept by every such insert: the per-principal ceiling is one
-- row, not a count over an orchestrator's million transfer agents.
CREATE TABLE created_agents (
    owner_principal TEXT PRIMARY KEY NOT NULL,
    agents          BIGINT NOT NULL CHECK (agents >= 0)
);
INSERT INTO created_agents (owner_principal, agents)
    SELECT owner_principal, count(*) FROM agents
    WHERE NOT EXISTS (SELECT 1 FROM transfers WHERE transfers.agent_id = agents.id)
    GROUP BY owner_principal;
