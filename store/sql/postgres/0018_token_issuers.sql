-- PostgreSQL counterpart of store/sql/0018_token_issuers.sql: the same tables, columns,
-- constraints and indexes (SQLite INTEGER -> BIGINT).

-- OAuth authorization servers whose access tokens (JWTs) the HTTP transport accepts beside API
-- keys (`ahp auth issuer add`), and the principal each token subject became on its first use.
CREATE TABLE token_issuers (
    issuer     TEXT PRIMARY KEY NOT NULL,   -- exactly the `iss` its tokens carry
    jwks_uri   TEXT,                        -- NULL: discovered from the issuer's metadata
    algorithms TEXT NOT NULL,               -- space-separated, e.g. 'ES256 RS256'
    scopes     TEXT NOT NULL,               -- the most its tokens may grant, space-separated
    created_at BIGINT NOT NULL
);

-- A token subject's principal: the `sub` of an issuer's tokens, bound to the principal that owns
-- what it creates. The principal's key_hash is the hash of a key never issued, so no key
-- authenticates as it; revoking the principal refuses the subject's tokens.
CREATE TABLE token_subjects (
    issuer       TEXT NOT NULL,
    subject      TEXT NOT NULL,
    principal_id TEXT NOT NULL UNIQUE REFERENCES principals (id),
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (issuer, subject)
);
