-- Several hosts on one database (DESIGN.md, "Several hosts").
--
-- A host is one `ahp serve` process under an operator-chosen id. It holds a lease it renews;
-- each time it starts it joins with the next `incarnation`, so a stale process of the same id
-- is told apart from the current one. A host whose lease has lapsed (by the clock of the
-- database) is `expired` once another host claims its agents; one that stopped cleanly is
-- `stopped` and its agents are claimable at once.
CREATE TABLE hosts (
    id               TEXT PRIMARY KEY NOT NULL,
    incarnation      INTEGER NOT NULL CHECK (incarnation >= 1),
    state            TEXT NOT NULL CHECK (state IN ('live', 'stopped', 'expired')),
    address          TEXT,                                     -- where it serves HTTP, if it does
    lease_expires_at INTEGER NOT NULL,
    joined_at        INTEGER NOT NULL,
    renewed_at       INTEGER NOT NULL,
    claimed_by       TEXT                                      -- the host that took its agents over
) STRICT;

-- The host carrying a transfer's agent: the one that began its activation, then whoever
-- claimed it (takeover) or received it (a move). NULL for rows written before this migration
-- (a single host adopts them at start).
ALTER TABLE transfers ADD COLUMN host_id TEXT;
CREATE INDEX transfers_by_host ON transfers (host_id, status);

-- The host that attached a host-held endpoint (the binding's), NULL for a client's endpoint.
ALTER TABLE agent_endpoints ADD COLUMN host_id TEXT;
CREATE INDEX agent_endpoints_by_host ON agent_endpoints (host_id, state);

-- A live move an operator asked for (`ahp agent move`): the carrying host hands the agent over
-- to `to_host` after its current turn; the row goes when the receiving host has bound it.
CREATE TABLE agent_moves (
    transfer_id    TEXT PRIMARY KEY NOT NULL REFERENCES transfers (id),
    from_host      TEXT NOT NULL,
    to_host        TEXT NOT NULL,
    requested_at   INTEGER NOT NULL,
    handed_over_at INTEGER
) STRICT;

-- Component bytes, content-addressed, so every host can load a component another registered.
CREATE TABLE component_bytes (
    digest TEXT PRIMARY KEY NOT NULL REFERENCES components (digest),
    bytes  BLOB NOT NULL
) STRICT;
