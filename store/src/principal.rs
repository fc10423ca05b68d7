//! Principals of the HTTP transport: named API keys, each with a set of [`ApiScope`]s — and
//! the principals OAuth token subjects become ([`crate::issuer`]), which hold no key.
//!
//! `ahp principal add` creates one and prints its key once; only a SHA-256 of the key is stored
//! (a key is 256 random bits, so a plain hash is enough: there is nothing to brute-force).
//! Over HTTP, `Authorization: Bearer <key>` is looked up by that hash; a revoked principal
//! authenticates as no one.

use std::fmt;
use std::str::FromStr;

use ahp_store_sql::{OptionalExtension, Row};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::id::{new_id, random_bytes};

/// Prefix of every principal id.
pub const PRINCIPAL_ID_PREFIX: &str = "prn_";
/// Prefix of every API key, so a leaked key is recognisable in logs and by secret scanners.
pub const API_KEY_PREFIX: &str = "ahp_key_";
/// Longest principal name, in bytes.
pub const MAX_PRINCIPAL_NAME_BYTES: usize = 64;
/// Longest string considered as an API key; longer ones are refused without hashing.
pub const MAX_API_KEY_LEN: usize = 128;
/// Most principals the store keeps (revoked ones included): a bound on what `list` returns.
pub const MAX_PRINCIPALS: usize = 1000;
/// How the name of a token subject's principal starts ([`crate::issuer`]); the operator's own
/// principals may not take it.
pub const TOKEN_PRINCIPAL_NAME_PREFIX: &str = "oauth-";

/// What a principal may do over the HTTP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum ApiScope {
    /// `get_status`.
    #[serde(rename = "transfer:read")]
    TransferRead,
    /// Every other transfer tool (the provision/activate token is still required on top).
    #[serde(rename = "transfer:write")]
    TransferWrite,
    /// Reporting spend against a transfer's budget (`report_usage`): metering is the host's,
    /// so a key that may move transfers does not thereby get to drain their budgets.
    #[serde(rename = "transfer:meter")]
    TransferMeter,
    /// Reading the conversation domain: agents, conversations, transcripts, inboxes.
    #[serde(rename = "communication:read")]
    CommunicationRead,
    /// Changing the conversation domain: agents, endpoints, conversations, posts, consumes.
    #[serde(rename = "communication:manage")]
    CommunicationManage,
}

impl ApiScope {
    /// Every scope.
    pub const ALL: [ApiScope; 5] = [
        Self::TransferRead,
        Self::TransferWrite,
        Self::TransferMeter,
        Self::CommunicationRead,
        Self::CommunicationManage,
    ];

    /// The scope's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::TransferRead => "transfer:read",
            Self::TransferWrite => "transfer:write",
            Self::TransferMeter => "transfer:meter",
            Self::CommunicationRead => "communication:read",
            Self::CommunicationManage => "communication:manage",
        }
    }
}

impl fmt::Display for ApiScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ApiScope {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s).ok_or_else(|| {
            let known = Self::ALL.map(Self::as_str).join(", ");
            Error::invalid("scope", format!("{s:?} is not a scope; the scopes are {known}"))
        })
    }
}

/// A named API key holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// `prn_…`.
    pub id: String,
    /// The operator's name for it.
    pub name: String,
    /// What it may do.
    pub scopes: Vec<ApiScope>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was revoked, if it was.
    pub revoked_at: Option<Timestamp>,
}

impl Principal {
    /// Whether it holds `scope`.
    pub fn has(&self, scope: ApiScope) -> bool {
        self.scopes.contains(&scope)
    }
}

fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

pub(crate) fn from_row(r: &Row) -> ahp_store_sql::SqlResult<Result<Principal>> {
    let (id, name, scopes, created_at, revoked_at): (String, String, String, i64, Option<i64>) =
        (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
    let scopes = scopes
        .split_whitespace()
        .map(str::parse::<ApiScope>)
        .collect::<Result<Vec<_>>>();
    Ok(match scopes {
        Ok(scopes) => Ok(Principal {
            id,
            name,
            scopes,
            created_at: Timestamp::from_micros(created_at),
            revoked_at: revoked_at.map(Timestamp::from_micros),
        }),
        Err(e) => Err(Error::CorruptRow {
            table: "principals",
            reason: format!("{id}: {e}"),
        }),
    })
}

const COLUMNS: &str = "id, name, scopes, created_at, revoked_at";
/// [`COLUMNS`] of a query whose `principals` table is aliased `p`.
pub(crate) const COLUMNS_OF_P: &str = "p.id, p.name, p.scopes, p.created_at, p.revoked_at";

impl Store {
    /// Creates a principal named `name` with `scopes` and returns it with its API key — the only
    /// time the key is ever available.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad name, no scopes, a name already taken, or more than
    /// [`MAX_PRINCIPALS`] principals.
    pub fn add_principal(&mut self, name: &str, scopes: &[ApiScope]) -> Result<(Principal, String)> {
        let name_ok = !name.is_empty()
            && name.len() <= MAX_PRINCIPAL_NAME_BYTES
            && name.as_bytes()[0].is_ascii_alphanumeric()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'));
        if !name_ok {
            return Err(Error::invalid(
                "name",
                format!(
                    "must be 1 to {MAX_PRINCIPAL_NAME_BYTES} of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
                ),
            ));
        }
        if name.starts_with(TOKEN_PRINCIPAL_NAME_PREFIX) {
            return Err(Error::invalid(
                "name",
                format!("names starting {TOKEN_PRINCIPAL_NAME_PREFIX:?} are those of token subjects"),
            ));
        }
        if scopes.is_empty() {
            return Err(Error::invalid("scope", "give at least one scope"));
        }
        let mut scopes = scopes.to_vec();
        scopes.sort();
        scopes.dedup();
        let key = format!("{API_KEY_PREFIX}{}", hex::encode(random_bytes::<32>()));
        let now = self.now();
        let id = new_id(PRINCIPAL_ID_PREFIX);
        let scope_text = scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ");
        let key_hash = hash_key(&key);
        self.write(|tx| {
            let count: i64 = tx.query_row("SELECT count(*) FROM principals", [], |r| r.get(0))?;
            if count >= MAX_PRINCIPALS as i64 {
                return Err(Error::invalid(
                    "name",
                    format!("the store already holds {MAX_PRINCIPALS} principals"),
                ));
            }
            let taken = tx
                .query_row("SELECT 1 FROM principals WHERE name = ?1", [name], |_| Ok(()))
                .optional()?;
            if taken.is_some() {
                return Err(Error::invalid(
                    "name",
                    format!("a principal named {name:?} already exists"),
                ));
            }
            tx.execute(
                "INSERT INTO principals (id, name, key_hash, scopes, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                (&id, name, &key_hash, &scope_text, now.as_micros()),
            )?;
            Ok(())
        })?;
        Ok((
            Principal {
                id,
                name: name.to_owned(),
                scopes,
                created_at: now,
                revoked_at: None,
            },
            key,
        ))
    }

    /// Every principal, oldest first (at most [`MAX_PRINCIPALS`]).
    ///
    /// # Errors
    ///
    /// [`Error::CorruptRow`] for an unknown scope in the database.
    pub fn list_principals(&mut self) -> Result<Vec<Principal>> {
        let tx = self.autocommit();
        let sql = format!("SELECT {COLUMNS} FROM principals ORDER BY created_at, id LIMIT {MAX_PRINCIPALS}");
        let mut stmt = tx.prepare(&sql)?;
        let rows = stmt.query_map([], from_row)?;
        rows.map(|r| r?).collect()
    }

    /// Revokes the principal named `name`; its key stops working at once. Revoking twice is
    /// refused so an operator notices a typo'd name.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] if no unrevoked principal has that name.
    pub fn revoke_principal(&mut self, name: &str) -> Result<Principal> {
        let now = self.now();
        self.write(|tx| {
            let changed = tx.execute(
                "UPDATE principals SET revoked_at = ?2 WHERE name = ?1 AND revoked_at IS NULL",
                (name, now.as_micros()),
            )?;
            if changed == 0 {
                return Err(Error::invalid("name", format!("no active principal named {name:?}")));
            }
            tx.query_row(
                &format!("SELECT {COLUMNS} FROM principals WHERE name = ?1"),
                [name],
                from_row,
            )?
        })
    }

    /// The unrevoked principal with id `id`, or `None` (unknown, malformed or revoked): how a
    /// console session re-checks, on every request, that its key still stands.
    ///
    /// # Errors
    ///
    /// [`Error::CorruptRow`] for an unknown scope in the database.
    pub fn active_principal(&mut self, id: &str) -> Result<Option<Principal>> {
        if !crate::id::is_well_formed(id, PRINCIPAL_ID_PREFIX) {
            return Ok(None);
        }
        self.autocommit()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM principals WHERE id = ?1 AND revoked_at IS NULL"
            ))?
            .query_row([id], from_row)
            .optional()?
            .transpose()
    }

    /// The unrevoked principal holding `api_key`, or `None`.
    ///
    /// # Errors
    ///
    /// Only if SQLite fails or the row is corrupt.
    pub fn authenticate(&mut self, api_key: &str) -> Result<Option<Principal>> {
        if api_key.len() > MAX_API_KEY_LEN || !api_key.starts_with(API_KEY_PREFIX) {
            return Ok(None);
        }
        self.autocommit()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM principals WHERE key_hash = ?1 AND revoked_at IS NULL"
            ))?
            .query_row([hash_key(api_key)], from_row)
            .optional()?
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_authenticate_until_revoked_and_are_stored_only_hashed() {
        let mut s = crate::testing::store().unwrap();
        let (p, key) = s
            .add_principal("orchestrator", &[ApiScope::TransferWrite, ApiScope::TransferRead])
            .unwrap();
        assert!(key.starts_with(API_KEY_PREFIX) && key.len() == API_KEY_PREFIX.len() + 64);
        assert_eq!(p.scopes, [ApiScope::TransferRead, ApiScope::TransferWrite]);
        assert_eq!(
            s.authenticate(&key).unwrap().as_ref().map(|x| x.id.as_str()),
            Some(p.id.as_str())
        );
        assert_eq!(s.authenticate("ahp_key_nope").unwrap(), None);
        assert_eq!(s.authenticate(&format!("{key}{}", "x".repeat(200))).unwrap(), None);
        let stored: String = s
            .autocommit()
            .query_row("SELECT key_hash FROM principals", [], |r| r.get(0))
            .unwrap();
        assert_ne!(stored, key);
        assert!(!stored.contains(&key[API_KEY_PREFIX.len()..]));
        assert_eq!(
            s.active_principal(&p.id).unwrap().map(|x| x.name),
            Some("orchestrator".into())
        );
        assert_eq!(s.active_principal("prn_nope").unwrap(), None);
        s.revoke_principal("orchestrator").unwrap();
        assert_eq!(s.authenticate(&key).unwrap(), None);
        assert_eq!(s.active_principal(&p.id).unwrap(), None);
        assert!(s.revoke_principal("orchestrator").is_err());
        assert_eq!(s.list_principals().unwrap().len(), 1);
    }

    #[test]
    fn bad_names_scopes_and_duplicates_are_refused() {
        let mut s = crate::testing::store().unwrap();
        for bad in [
            "",
            "Has Space",
            "-lead",
            "oauth-1",
            &"n".repeat(MAX_PRINCIPAL_NAME_BYTES + 1),
        ] {
            assert!(
                matches!(
                    s.add_principal(bad, &[ApiScope::TransferRead]),
                    Err(Error::InvalidInput { .. })
                ),
                "{bad:?}"
            );
        }
        s.add_principal(&"n".repeat(MAX_PRINCIPAL_NAME_BYTES), &[ApiScope::TransferRead])
            .unwrap();
        assert!(s.add_principal("a", &[]).is_err());
        s.add_principal("a", &[ApiScope::TransferRead]).unwrap();
        assert!(s.add_principal("a", &[ApiScope::TransferRead]).is_err());
        assert!("transfer:admin".parse::<ApiScope>().is_err());
        assert_eq!(s.list_principals().unwrap().len(), 2);
    }

    #[test]
    fn every_scope_round_trips_through_its_name_and_the_database() {
        let mut s = crate::testing::store().unwrap();
        for scope in ApiScope::ALL {
            assert_eq!(scope.as_str().parse::<ApiScope>().unwrap(), scope);
            assert_eq!(serde_json::to_value(scope).unwrap(), scope.as_str());
        }
        let (_, key) = s.add_principal("everything", &ApiScope::ALL).unwrap();
        assert_eq!(s.authenticate(&key).unwrap().unwrap().scopes, ApiScope::ALL);
        let err = "communication:admin".parse::<ApiScope>().unwrap_err().to_string();
        assert!(
            err.contains("communication:manage") && err.contains("transfer:meter"),
            "{err}"
        );
    }
}
