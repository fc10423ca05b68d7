-- The durable conversation domain: agents, endpoints, conversations, participants,
-- messages, per-recipient deliveries (the inbox), coalesced wake intents, wake delivery
-- attempts and principal-scoped idempotency records. Times are integer microseconds since the
-- Unix epoch. Principals are SHA-256 digests (lowercase hex) of an authenticated subject, never
-- the subject or a secret. Lifecycle strings are storage encodings of closed Rust enums; the
-- store refuses (fails closed on) any value it does not know, so no CHECK lists them here —
-- a newer build may add one, and an older build must then refuse rather than guess.

CREATE TABLE agents (
    id                    TEXT PRIMARY KEY NOT NULL,           -- agt_…
    owner_principal       TEXT NOT NULL,
    handle                TEXT NOT NULL,                       -- mutable, not unique
    display_name          TEXT NOT NULL,
    description           TEXT NOT NULL,
    specialties           TEXT NOT NULL,                       -- JSON array of strings
    profile_revision      INTEGER NOT NULL CHECK (profile_revision >= 1),
    controller_generation INTEGER NOT NULL DEFAULT 0 CHECK (controller_generation >= 0),
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
) STRICT;
CREATE INDEX agents_by_owner ON agents (owner_principal, id);

CREATE TABLE agent_endpoints (
    id               TEXT PRIMARY KEY NOT NULL,                -- ep_…
    agent_id         TEXT NOT NULL REFERENCES agents (id),
    principal        TEXT NOT NULL,                            -- the attaching principal
    generation       INTEGER NOT NULL CHECK (generation >= 1),
    state            TEXT NOT NULL,                            -- attached|detached|expired|replaced
    lease_expires_at INTEGER NOT NULL,
    wake_capable     INTEGER NOT NULL DEFAULT 0 CHECK (wake_capable IN (0, 1)),
    attached_at      INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    ended_at         INTEGER,
    UNIQUE (agent_id, generation)
) STRICT;
-- At most one attached endpoint per agent: attaching another replaces it.
CREATE UNIQUE INDEX agent_endpoints_one_attached ON agent_endpoints (agent_id) WHERE state = 'attached';

CREATE TABLE conversations (
    id              TEXT PRIMARY KEY NOT NULL,                 -- cv_…
    title           TEXT NOT NULL,
    state           TEXT NOT NULL,                             -- open|closed
    human_principal TEXT NOT NULL,                             -- the human participant
    next_seq        INTEGER NOT NULL CHECK (next_seq >= 1),
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    last_message_at INTEGER,
    closed_at       INTEGER
) STRICT;
CREATE INDEX conversations_by_human ON conversations (human_principal, state, created_at);

-- Agent participants (the human participant is conversations.human_principal).
CREATE TABLE conversation_agents (
    conversation_id TEXT NOT NULL REFERENCES conversations (id),
    agent_id        TEXT NOT NULL REFERENCES agents (id),
    position        INTEGER NOT NULL,                          -- join order, from 0
    added_at        INTEGER NOT NULL,
    PRIMARY KEY (conversation_id, agent_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX conversation_agents_by_agent ON conversation_agents (agent_id);

-- Append-only: rows are never updated or deleted.
CREATE TABLE messages (
    id                 TEXT PRIMARY KEY NOT NULL,              -- msg_…
    conversation_id    TEXT NOT NULL REFERENCES conversations (id),
    seq                INTEGER NOT NULL CHECK (seq >= 1),
    author_kind        TEXT NOT NULL,                          -- human|agent
    author_principal   TEXT NOT NULL,
    author_agent_id    TEXT REFERENCES agents (id),
    author_endpoint_id TEXT,
    author_generation  INTEGER,
    body               TEXT NOT NULL,
    reply_to           TEXT REFERENCES messages (id),
    created_at         INTEGER NOT NULL,
    UNIQUE (conversation_id, seq)
) STRICT;

-- The inbox. `delivery_order` is the rowid: deliveries are never deleted, so it only grows.
CREATE TABLE deliveries (
    delivery_order     INTEGER PRIMARY KEY,
    message_id         TEXT NOT NULL REFERENCES messages (id),
    recipient_agent_id TEXT NOT NULL REFERENCES agents (id),
    state              TEXT NOT NULL,                          -- queued|consumed
    created_at         INTEGER NOT NULL,
    consumed_at        INTEGER,
    UNIQUE (message_id, recipient_agent_id)
) STRICT;
CREATE INDEX deliveries_by_recipient ON deliveries (recipient_agent_id, delivery_order);

CREATE TABLE wakes (
    id                   TEXT PRIMARY KEY NOT NULL,            -- wk_…
    agent_id             TEXT NOT NULL REFERENCES agents (id),
    state                TEXT NOT NULL,                        -- pending|claimed|dispatched|consumed
    delivery_count       INTEGER NOT NULL CHECK (delivery_count >= 1),
    first_delivery_order INTEGER NOT NULL,
    high_water_order     INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    dispatched_at        INTEGER,
    consumed_at          INTEGER
) STRICT;
-- At most one open (not yet fenced) wake per agent: later deliveries coalesce into it.
CREATE UNIQUE INDEX wakes_one_open ON wakes (agent_id) WHERE state IN ('pending', 'claimed');
CREATE INDEX wakes_by_agent ON wakes (agent_id, created_at);

CREATE TABLE wake_attempts (
    id                 TEXT PRIMARY KEY NOT NULL,              -- wka_…
    wake_id            TEXT NOT NULL REFERENCES wakes (id),
    agent_id           TEXT NOT NULL REFERENCES agents (id),
    endpoint_id        TEXT NOT NULL REFERENCES agent_endpoints (id),
    generation         INTEGER NOT NULL,
    state              TEXT NOT NULL,                          -- claimed|released|dispatched|accepted|delivery_unknown|consumed
    claim_expires_at   INTEGER NOT NULL,
    consume_token_hash TEXT,                                   -- SHA-256 of the token; set at the fence
    claimed_at         INTEGER NOT NULL,
    dispatched_at      INTEGER,
    finished_at        INTEGER
) STRICT;
CREATE INDEX wake_attempts_by_wake ON wake_attempts (wake_id);
CREATE INDEX wake_attempts_in_flight ON wake_attempts (endpoint_id) WHERE state IN ('claimed', 'dispatched');
-- At most one live (claimed or dispatched) attempt per wake.
CREATE UNIQUE INDEX wake_attempts_one_live ON wake_attempts (wake_id) WHERE state IN ('claimed', 'dispatched');

-- Principal-scoped idempotency: hashes of the key and of the canonical request, never the key.
CREATE TABLE communication_idempotency (
    principal    TEXT NOT NULL,
    operation    TEXT NOT NULL,
    key_hash     TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    resource_id  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (principal, operation, key_hash)
) STRICT, WITHOUT ROWID;
