-- PostgreSQL counterpart of store/sql/0004_sandbox.sql: the same tables, columns, constraints and indexes
-- (SQLite INTEGER -> BIGINT, TEXT -> TEXT, BLOB -> BYTEA; STRICT and WITHOUT ROWID have no
-- counterpart and need none: PostgreSQL columns are always typed).

-- SQLite's `GLOB 'sha256:*'` is `LIKE 'sha256:%'` here: both are case-sensitive prefix tests
-- (PostgreSQL has no GLOB; its LIKE, unlike SQLite's, is case-sensitive).

-- The sandbox host's durable state: the component registry and per-transfer checkpoints.

-- Guest components the host has registered. The bytes live on the host's disk, named by digest;
-- a transfer's `component` is a digest or one of these names.
CREATE TABLE components (
    digest        TEXT PRIMARY KEY NOT NULL CHECK (digest LIKE 'sha256:%' AND length(digest) = 71),
    name          TEXT UNIQUE,
    size_bytes    BIGINT NOT NULL CHECK (size_bytes > 0),
    registered_at BIGINT NOT NULL
);

-- An agent's durable working memory: one blob per transfer, bounded by its tier when saved.
CREATE TABLE checkpoints (
    transfer_id TEXT PRIMARY KEY NOT NULL REFERENCES transfers (id),
    state       BYTEA NOT NULL,
    saved_at    BIGINT NOT NULL
);
