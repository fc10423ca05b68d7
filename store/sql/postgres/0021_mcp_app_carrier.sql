-- The MCP App pull carrier (the conversation seed's G3): a live View in a chat host binds an
-- agent's endpoint, then acquires, prepares and finishes its wakes through the same claim,
-- dispatch fence and consume as the push carrier (`store/src/conversation/app_carrier.rs`).
--
-- On the endpoint, two bounded recovery values, never the values themselves:
--   app_binding_hash  SHA-256 of the View's binding fence (128 random bits the View drew): the
--                     exact View that holds the binding. Cleared by unbind, lease expiry,
--                     detach and replacement; kept across a host restart (exact recovery).
--   app_window_hash   SHA-256 of the chat host's window key: which window may rebind from a
--                     refreshed View. Kept on natural expiry (only the replacement transition
--                     below reads it then); cleared by detach and ordinary replacement.
ALTER TABLE agent_endpoints ADD COLUMN app_binding_hash TEXT;
ALTER TABLE agent_endpoints ADD COLUMN app_window_hash TEXT;
-- The host whose process holds the View's binding (its carrier registry), while one does: what
-- another host of the cluster reads to vouch for the agent's readiness (with that host's
-- lease). Not `host_id`, which names the host of a host-held endpoint and is what a host's
-- takeover retires.
ALTER TABLE agent_endpoints ADD COLUMN app_host_id TEXT;

-- Which carrier claimed an attempt: 'host' (a process's push carrier) or 'mcp_app' (a View),
-- and for a View's attempt the binding that claimed it: only that View may prepare or finish it.
ALTER TABLE wake_attempts ADD COLUMN carrier TEXT NOT NULL DEFAULT 'host';
ALTER TABLE wake_attempts ADD COLUMN app_binding_hash TEXT;

-- The expired-endpoint replacement's idempotency record: the old selector (endpoint and
-- generation) to the successor the one fenced transaction created with it. A retry after a
-- lost answer returns the same successor while it is still the current endpoint and still
-- holds the window; once a later one replaced it, the old selector is stale.
CREATE TABLE app_endpoint_replacements (
    old_endpoint_id TEXT PRIMARY KEY NOT NULL REFERENCES agent_endpoints (id),
    principal       TEXT NOT NULL,
    agent_id        TEXT NOT NULL REFERENCES agents (id),
    old_generation  BIGINT NOT NULL,
    new_endpoint_id TEXT NOT NULL UNIQUE REFERENCES agent_endpoints (id),
    new_generation  BIGINT NOT NULL,
    created_at      BIGINT NOT NULL
);
