-- Cursors in commit order. A reader that pages forward (`> last_seen`) or backward
-- (`< oldest_seen`) over a value must never find, later, a row on the far side of its cursor.
-- SQLite has one writer at a time, so its rowids already come in commit order; a PostgreSQL
-- sequence hands values out in the order transactions ask for them, and a row that took an
-- early value can commit after a reader has paged past it. So every cursor is now a counter
-- per parent, assigned as max + 1 inside the writing transaction: two writers of one parent
-- read the same maximum, so they cannot both commit (SQLite: one writer; PostgreSQL: the
-- serializable write transaction of one of them fails with 40001 and runs again, after the
-- other committed), and a value is only ever handed out once every smaller one has committed.

-- 1. The inbox: `delivery_order` counts its recipient's deliveries. The table is keyed by
-- (recipient, order), so an inbox is one contiguous range and a post inserts at the right edge
-- of each recipient's range. Existing deliveries keep their order (already increasing within
-- each inbox), so a cursor a client holds, and a wake's first and high-water orders, still
-- mean what they meant.
CREATE TABLE deliveries_v2 (
    recipient_agent_id TEXT NOT NULL REFERENCES agents (id),
    delivery_order     INTEGER NOT NULL,                       -- 1, 2, … within the recipient's inbox
    message_id         TEXT NOT NULL REFERENCES messages (id),
    state              TEXT NOT NULL,                          -- queued|consumed
    created_at         INTEGER NOT NULL,
    consumed_at        INTEGER,
    PRIMARY KEY (recipient_agent_id, delivery_order),
    UNIQUE (message_id, recipient_agent_id)
) STRICT, WITHOUT ROWID;
INSERT INTO deliveries_v2 (recipient_agent_id, delivery_order, message_id, state, created_at, consumed_at)
SELECT recipient_agent_id, delivery_order, message_id, state, created_at, consumed_at FROM deliveries;
DROP TABLE deliveries;
ALTER TABLE deliveries_v2 RENAME TO deliveries;

-- 2. A transfer's events: `seq` counts them (1, 2, …), numbered here in the order of `id`.
ALTER TABLE usage_events ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE usage_events SET seq = r.n
FROM (SELECT id AS rid, row_number() OVER (PARTITION BY transfer_id ORDER BY id) AS n FROM usage_events) AS r
WHERE usage_events.id = r.rid;
CREATE UNIQUE INDEX usage_events_by_transfer_seq ON usage_events (transfer_id, seq);

-- 3. The conversation audit log: an event's position among its agent's events and among its
-- conversation's (NULL where it has none), numbered here in the order of `id`. The whole
-- log, across every agent, has no such counter: one would make every write of the domain
-- wait for every other.
ALTER TABLE communication_events ADD COLUMN agent_seq INTEGER;
ALTER TABLE communication_events ADD COLUMN conversation_seq INTEGER;
UPDATE communication_events SET agent_seq = r.n
FROM (SELECT id AS rid, row_number() OVER (PARTITION BY agent_id ORDER BY id) AS n
      FROM communication_events WHERE agent_id IS NOT NULL) AS r
WHERE communication_events.id = r.rid;
UPDATE communication_events SET conversation_seq = r.n
FROM (SELECT id AS rid, row_number() OVER (PARTITION BY conversation_id ORDER BY id) AS n
      FROM communication_events WHERE conversation_id IS NOT NULL) AS r
WHERE communication_events.id = r.rid;
DROP INDEX communication_events_by_agent;
DROP INDEX communication_events_by_conversation;
CREATE UNIQUE INDEX communication_events_by_agent ON communication_events (agent_id, agent_seq);
CREATE UNIQUE INDEX communication_events_by_conversation ON communication_events (conversation_id, conversation_seq);

-- 4. Attention events, paged until now by (created_at, id): a timestamp taken when the writing
-- transaction began, which is no more in commit order than a sequence. `seq` counts the
-- owner's events (an agent's are a part of them), numbered here in that old order.
ALTER TABLE attention_events ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
UPDATE attention_events SET seq = r.n
FROM (SELECT id AS eid, row_number() OVER (PARTITION BY owner_principal ORDER BY created_at, id) AS n
      FROM attention_events) AS r
WHERE attention_events.id = r.eid;
DROP INDEX attention_events_by_owner;
CREATE UNIQUE INDEX attention_events_by_owner ON attention_events (owner_principal, seq);
