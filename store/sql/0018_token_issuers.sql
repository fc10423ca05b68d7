-- OAuth authorization servers whose access tokens (JWTs) the HTTP transport accepts beside API
-- keys (`ahp auth issuer add`), and the principal each token subject became on its first use.
CREATE TABLE token_issuers (
    issuer     TEXT PRIMARY KEY NOT NULL,   -- exactly the `iss` its tokens carry
    jwks_uri   TEXT,                        -- NULL: discovered from the issuer's metadata
    algorithms TEXT NOT NULL,               -- space-separated, e.g. 'ES256 RS256'
    scopes     TEXT NOT NULL,               -- the most its tokens may grant, space-separated
    created_at INTEGER NOT NULL
) STRICT;

-- A token subject's principal: the `sub` of an issuer's tokens, bound to the principal that owns
-- what it creates. The principal's key_hash is the hash of a key never issued, so no key
-- authenticates as it; revoking the principal refuses the subject's tokens.
CREATE TABLE token_subjects (
    issuer       TEXT NOT NULL,
    subject      TEXT NOT NULL,
    principal_id TEXT NOT NULL UNIQUE REFERENCES principals (id),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (issuer, subject)
) STRICT;
