-- PostgreSQL counterpart of store/sql/0013_commit_ordered_cursors.sql (read it for why): the
-- same keys, columns and indexes. Here the trap is real: `delivery_order` and the events' `id`
-- were identities, whose values are in the order transactions took them, not in commit order.

-- 1. The inbox, keyed by (recipient, order); `delivery_order` is no longer an identity.
-- Existing deliveries keep their order.
ALTER TABLE deliveries ALTER COLUMN delivery_order DROP IDENTITY;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_pkey;
ALTER TABLE deliveries ADD PRIMARY KEY (recipient_agent_id, delivery_order);
DROP INDEX deliveries_by_recipient;

-- 2. A transfer's events: `seq` counts them, numbered here in the order of `id`.
ALTER TABLE usage_events ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE usage_events SET seq = r.n
FROM (SELECT id, row_number() OVER (PARTITION BY transfer_id ORDER BY id) AS n FROM usage_events) AS r
WHERE usage_events.id = r.id;
CREATE UNIQUE INDEX usage_events_by_transfer_seq ON usage_events (transfer_id, seq);

-- 3. The conversation audit log: positions among the agent's and the conversation's events.
ALTER TABLE communication_events ADD COLUMN agent_seq BIGINT;
ALTER TABLE communication_events ADD COLUMN conversation_seq BIGINT;
UPDATE communication_events SET agent_seq = r.n
FROM (SELECT id, row_number() OVER (PARTITION BY agent_id ORDER BY id) AS n
      FROM communication_events WHERE agent_id IS NOT NULL) AS r
WHERE communication_events.id = r.id;
UPDATE communication_events SET conversation_seq = r.n
FROM (SELECT id, row_number() OVER (PARTITION BY conversation_id ORDER BY id) AS n
      FROM communication_events WHERE conversation_id IS NOT NULL) AS r
WHERE communication_events.id = r.id;
DROP INDEX communication_events_by_agent;
DROP INDEX communication_events_by_conversation;
CREATE UNIQUE INDEX communication_events_by_agent ON communication_events (agent_id, agent_seq);
CREATE UNIQUE INDEX communication_events_by_conversation ON communication_events (conversation_id, conversation_seq);

-- 4. Attention events: `seq` counts the owner's events, numbered in their old (created_at, id) order.
ALTER TABLE attention_events ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE attention_events SET seq = r.n
FROM (SELECT id, row_number() OVER (PARTITION BY owner_principal ORDER BY created_at, id) AS n
      FROM attention_events) AS r
WHERE attention_events.id = r.id;
DROP INDEX attention_events_by_owner;
CREATE UNIQUE INDEX attention_events_by_owner ON attention_events (owner_principal, seq);
