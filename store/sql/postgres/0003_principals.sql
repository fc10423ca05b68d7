-- PostgreSQL counterpart of store/sql/0003_principals.sql: the same tables, columns, constraints and indexes
-- (SQLite INTEGER -> BIGINT, TEXT -> TEXT, BLOB -> BYTEA; STRICT and WITHOUT ROWID have no
-- counterpart and need none: PostgreSQL columns are always typed).

-- Principals of the transfer MCP server's HTTP transport: named API keys with scopes.
-- Only a SHA-256 of each key is stored; the key itself is shown once, when it is created.
CREATE TABLE principals (
    id         TEXT PRIMARY KEY NOT NULL,   -- prn_…
    name       TEXT NOT NULL UNIQUE,
    key_hash   TEXT NOT NULL UNIQUE,        -- lowercase hex SHA-256 of the API key
    scopes     TEXT NOT NULL,               -- space-separated, e.g. 'transfer:read transfer:write'
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
