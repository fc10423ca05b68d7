-- PostgreSQL counterpart of store/sql/0007_host_held_endpoints.sql: the same tables, columns, constraints and indexes
-- (SQLite INTEGER -> BIGINT, TEXT -> TEXT, BLOB -> BYTEA; STRICT and WITHOUT ROWID have no
-- counterpart and need none: PostgreSQL columns are always typed).

-- The host's endpoint is the host's (SECURITY.md, "The host-held endpoint"): the endpoint a
-- binding attaches for a transfer's agent is marked host-held, and only the host's own caller
-- acts through it. Endpoints attached with `attach_agent_endpoint` are not host-held.
ALTER TABLE agent_endpoints ADD COLUMN host_held BIGINT NOT NULL DEFAULT 0 CHECK (host_held IN (0, 1));

-- Endpoints written before this migration: exactly those a binding attached are host-held.
-- Every binding recorded its endpoint in the transfer's `agent_bound` event (its detail holds
-- `"endpointId":"ep_…"`); an endpoint a client attached to a transfer's agent is named by no
-- such event and stays not host-held, so provenance never claims a sandbox for a message a
-- client posted. (`LIKE` and `||` are portable; `_` in the pattern matches itself too.)
UPDATE agent_endpoints SET host_held = 1
WHERE EXISTS (
    SELECT 1 FROM transfers t JOIN usage_events e ON e.transfer_id = t.id
    WHERE t.agent_id = agent_endpoints.agent_id
      AND e.type = 'agent_bound'
      AND e.detail LIKE '%"endpointId":"' || agent_endpoints.id || '"%'
);
