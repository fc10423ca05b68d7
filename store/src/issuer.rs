//! Token issuers: the OAuth authorization servers whose access tokens the HTTP transport
//! accepts beside API keys (`ahp auth issuer add|list|remove`), and the principal each token
//! subject becomes.
//!
//! An issuer is named exactly as its tokens' `iss` claim spells it, with the signing algorithms
//! its tokens may use (asymmetric ones only: the host holds no issuer's secret) and the most
//! scopes its tokens may grant. The host verifies a token against the issuer's published keys
//! (its JWKS, at `jwks_uri` or discovered from its metadata) and then asks
//! [`Store::token_principal`] who the token's subject is: the principal bound to that
//! `(issuer, sub)`, created on the subject's first use. That principal owns what the subject
//! creates exactly as an API key's principal does — the same transfer ownership, the same
//! conversation identity, the same hiding — and revoking it (`ahp principal revoke`) refuses the
//! subject's tokens from then on. Its key hash is the hash of a key nobody was ever given, so no
//! API key authenticates as it.
//!
//! Bounds: at most [`MAX_TOKEN_ISSUERS`] issuers; issuer and key-set URLs at most
//! [`MAX_ISSUER_URL_BYTES`], `https` (or `http` on a loopback host); subjects at most
//! [`MAX_TOKEN_SUBJECT_BYTES`]; a new subject's principal counts against the store's
//! [`MAX_PRINCIPALS`].

use std::fmt::Write as _;

use ahp_store_sql::{OptionalExtension, Row};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::clock::Timestamp;
use crate::db::Store;
use crate::error::{Error, Result};
use crate::id::{new_id, random_bytes};
use crate::principal::{self, ApiScope, MAX_PRINCIPALS, PRINCIPAL_ID_PREFIX, Principal, TOKEN_PRINCIPAL_NAME_PREFIX};

/// Most token issuers the store keeps.
pub const MAX_TOKEN_ISSUERS: usize = 16;
/// Longest issuer or key-set URL, in bytes.
pub const MAX_ISSUER_URL_BYTES: usize = 512;
/// Longest token subject (`sub`), in bytes.
pub const MAX_TOKEN_SUBJECT_BYTES: usize = 255;
/// The signing algorithms an issuer may be allowed, by their JOSE names: the asymmetric ones
/// (an HMAC secret would have to be shared with the host, and `none` is no signature).
pub const SIGNING_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// An authorization server whose access tokens the HTTP transport accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenIssuer {
    /// Exactly the `iss` its tokens carry.
    pub issuer: String,
    /// Where its signing keys are published; `None`: the `jwks_uri` of its metadata.
    pub jwks_uri: Option<String>,
    /// The algorithms its tokens may be signed with (a subset of [`SIGNING_ALGORITHMS`]).
    pub algorithms: Vec<String>,
    /// The most scopes its tokens may grant; a token's other scopes are ignored.
    pub scopes: Vec<ApiScope>,
    /// When the operator added it.
    pub created_at: Timestamp,
}

/// Checks an issuer or key-set URL (also the key-set URL an issuer's metadata names): at most
/// [`MAX_ISSUER_URL_BYTES`], absolute, `https` (or `http` to a loopback host), no query or
/// fragment, no credentials.
///
/// # Errors
///
/// [`Error::InvalidInput`] naming `field`.
pub fn check_url(field: &str, value: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::invalid(field, format!("{value:?} {why}")));
    if value.len() > MAX_ISSUER_URL_BYTES {
        return Err(Error::invalid(
            field,
            format!("longer than {MAX_ISSUER_URL_BYTES} bytes"),
        ));
    }
    let Ok(url) = url::Url::parse(value) else {
        return bad("is not an absolute URL");
    };
    if url.query().is_some() || url.fragment().is_some() {
        return bad("has a query or fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad("carries credentials");
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => return bad("names no host"),
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => bad("must be https (http only on a loopback host)"),
    }
}

fn check_algorithms(algorithms: &[String]) -> Result<Vec<String>> {
    if algorithms.is_empty() {
        return Err(Error::invalid("algorithm", "give at least one algorithm"));
    }
    let mut out: Vec<String> = Vec::new();
    for a in algorithms {
        if !SIGNING_ALGORITHMS.contains(&a.as_str()) {
            return Err(Error::invalid(
                "algorithm",
                format!(
                    "{a:?} is not allowed; the algorithms are {}",
                    SIGNING_ALGORITHMS.join(", ")
                ),
            ));
        }
        if !out.contains(a) {
            out.push(a.clone());
        }
    }
    Ok(out)
}

fn scope_text(scopes: &[ApiScope]) -> String {
    scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
}

fn parse_scopes(table: &'static str, text: &str) -> Result<Vec<ApiScope>> {
    text.split_whitespace()
        .map(str::parse::<ApiScope>)
        .collect::<Result<Vec<_>>>()
        .map_err(|e| Error::CorruptRow {
            table,
            reason: e.to_string(),
        })
}

fn issuer_of(r: &Row) -> ahp_store_sql::SqlResult<Result<TokenIssuer>> {
    let (issuer, jwks_uri, algorithms, scopes, created_at): (String, Option<String>, String, String, i64) =
        (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
    Ok(parse_scopes("token_issuers", &scopes).map(|scopes| TokenIssuer {
        issuer,
        jwks_uri,
        algorithms: algorithms.split_whitespace().map(str::to_owned).collect(),
        scopes,
        created_at: Timestamp::from_micros(created_at),
    }))
}

const ISSUER_COLUMNS: &str = "issuer, jwks_uri, algorithms, scopes, created_at";

/// The name of the principal a token subject becomes: [`TOKEN_PRINCIPAL_NAME_PREFIX`] and a
/// hash of issuer and subject (names are short and plain; subjects are neither).
fn principal_name(issuer: &str, subject: &str) -> String {
    let digest = Sha256::digest(format!("{issuer}\n{subject}").as_bytes());
    let mut name = TOKEN_PRINCIPAL_NAME_PREFIX.to_owned();
    for b in &digest[..8] {
        let _ = write!(name, "{b:02x}");
    }
    name
}

impl Store {
    /// Adds an issuer whose access tokens the HTTP transport accepts from now on.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad URL, an algorithm outside [`SIGNING_ALGORITHMS`], no
    /// algorithm or scope, an issuer already added, or more than [`MAX_TOKEN_ISSUERS`].
    pub fn add_token_issuer(
        &mut self,
        issuer: &str,
        jwks_uri: Option<&str>,
        algorithms: &[String],
        scopes: &[ApiScope],
    ) -> Result<TokenIssuer> {
        check_url("issuer", issuer)?;
        if let Some(uri) = jwks_uri {
            check_url("jwks_uri", uri)?;
        }
        let algorithms = check_algorithms(algorithms)?;
        if scopes.is_empty() {
            return Err(Error::invalid("scope", "give at least one scope"));
        }
        let mut scopes = scopes.to_vec();
        scopes.sort();
        scopes.dedup();
        let now = self.now();
        self.write(|tx| {
            let count: i64 = tx.query_row("SELECT count(*) FROM token_issuers", [], |r| r.get(0))?;
            if count >= MAX_TOKEN_ISSUERS as i64 {
                return Err(Error::invalid(
                    "issuer",
                    format!("the store already holds {MAX_TOKEN_ISSUERS} issuers"),
                ));
            }
            let taken = tx
                .query_row("SELECT 1 FROM token_issuers WHERE issuer = ?1", [issuer], |_| Ok(()))
                .optional()?;
            if taken.is_some() {
                return Err(Error::invalid("issuer", format!("{issuer:?} is already an issuer")));
            }
            tx.execute(
                "INSERT INTO token_issuers (issuer, jwks_uri, algorithms, scopes, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                (issuer, jwks_uri, algorithms.join(" "), scope_text(&scopes), now.as_micros()),
            )?;
            Ok(())
        })?;
        Ok(TokenIssuer {
            issuer: issuer.to_owned(),
            jwks_uri: jwks_uri.map(str::to_owned),
            algorithms,
            scopes,
            created_at: now,
        })
    }

    /// Every issuer, oldest first (at most [`MAX_TOKEN_ISSUERS`]).
    ///
    /// # Errors
    ///
    /// [`Error::CorruptRow`] for an unknown scope in the database.
    pub fn list_token_issuers(&mut self) -> Result<Vec<TokenIssuer>> {
        let tx = self.autocommit();
        let sql =
            format!("SELECT {ISSUER_COLUMNS} FROM token_issuers ORDER BY created_at, issuer LIMIT {MAX_TOKEN_ISSUERS}");
        let mut stmt = tx.prepare(&sql)?;
        let rows = stmt.query_map([], issuer_of)?;
        rows.map(|r| r?).collect()
    }

    /// The issuer named exactly `issuer`, if the operator added it: how the host decides,
    /// before fetching anything, whether a token's `iss` is one it accepts.
    ///
    /// # Errors
    ///
    /// [`Error::CorruptRow`] for an unknown scope in the database.
    pub fn token_issuer(&mut self, issuer: &str) -> Result<Option<TokenIssuer>> {
        if issuer.len() > MAX_ISSUER_URL_BYTES {
            return Ok(None);
        }
        self.autocommit()
            .prepare_cached(&format!("SELECT {ISSUER_COLUMNS} FROM token_issuers WHERE issuer = ?1"))?
            .query_row([issuer], issuer_of)
            .optional()?
            .transpose()
    }

    /// Removes an issuer: its tokens are refused from the next request on. The principals its
    /// subjects became stay (they own transfers and agents); a token of the issuer, added
    /// again, finds them.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] if no issuer is named exactly `issuer`.
    pub fn remove_token_issuer(&mut self, issuer: &str) -> Result<TokenIssuer> {
        let Some(found) = self.token_issuer(issuer)? else {
            return Err(Error::invalid("issuer", format!("no issuer {issuer:?}")));
        };
        self.write(|tx| {
            tx.execute("DELETE FROM token_issuers WHERE issuer = ?1", [issuer])?;
            Ok(())
        })?;
        Ok(found)
    }

    /// The principal a verified token's `subject` of `issuer` acts as, created on the subject's
    /// first use, with the scopes both it and the issuer still hold; `None` if the issuer was
    /// removed or the principal revoked. Call it only for a token whose signature, issuer,
    /// audience and times the caller has verified.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (field `sub`) for an empty, over-long or control-character
    /// subject, or (field `name`) when the store already holds [`MAX_PRINCIPALS`].
    pub fn token_principal(&mut self, issuer: &str, subject: &str) -> Result<Option<Principal>> {
        if subject.is_empty() || subject.len() > MAX_TOKEN_SUBJECT_BYTES || subject.chars().any(char::is_control) {
            return Err(Error::invalid(
                "sub",
                format!("a token subject is 1 to {MAX_TOKEN_SUBJECT_BYTES} bytes without control characters"),
            ));
        }
        let Some(found) = self.token_issuer(issuer)? else {
            return Ok(None);
        };
        let bound = |tx: &ahp_store_sql::Tx<'_>| -> Result<Option<Option<Principal>>> {
            let sql = format!(
                "SELECT {} FROM token_subjects s JOIN principals p ON p.id = s.principal_id WHERE s.issuer = ?1 AND s.subject = ?2",
                principal::COLUMNS_OF_P
            );
            let row = tx
                .prepare_cached(&sql)?
                .query_row((issuer, subject), principal::from_row)
                .optional()?
                .transpose()?;
            Ok(row.map(|p| (p.revoked_at.is_none()).then_some(p)))
        };
        let principal = match bound(&self.autocommit())? {
            Some(p) => p,
            None => {
                let now = self.now();
                self.write(|tx| {
                    if let Some(p) = bound(tx)? {
                        return Ok(p);
                    }
                    let count: i64 = tx.query_row("SELECT count(*) FROM principals", [], |r| r.get(0))?;
                    if count >= MAX_PRINCIPALS as i64 {
                        return Err(Error::invalid(
                            "name",
                            format!("the store already holds {MAX_PRINCIPALS} principals"),
                        ));
                    }
                    let id = new_id(PRINCIPAL_ID_PREFIX);
                    let name = principal_name(issuer, subject);
                    // The hash of a key nobody is ever given: no API key authenticates as this
                    // principal.
                    let unissued = hex::encode(Sha256::digest(random_bytes::<32>()));
                    tx.execute(
                        "INSERT INTO principals (id, name, key_hash, scopes, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                        (&id, &name, &unissued, scope_text(&found.scopes), now.as_micros()),
                    )?;
                    tx.execute(
                        "INSERT INTO token_subjects (issuer, subject, principal_id, created_at) VALUES (?1, ?2, ?3, ?4)",
                        (issuer, subject, &id, now.as_micros()),
                    )?;
                    Ok(Some(Principal {
                        id,
                        name,
                        scopes: found.scopes.clone(),
                        created_at: now,
                        revoked_at: None,
                    }))
                })?
            }
        };
        Ok(principal.map(|mut p| {
            p.scopes.retain(|s| found.scopes.contains(s));
            p
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUER: &str = "https://login.example.com/tenant";

    fn es256() -> Vec<String> {
        vec!["ES256".into()]
    }

    #[test]
    fn issuers_are_added_listed_and_removed_and_bad_ones_refused() {
        let mut s = crate::testing::store().unwrap();
        let added = s
            .add_token_issuer(
                ISSUER,
                None,
                &["ES256".into(), "RS256".into(), "ES256".into()],
                &ApiScope::ALL,
            )
            .unwrap();
        assert_eq!(added.algorithms, ["ES256", "RS256"]);
        assert_eq!(s.list_token_issuers().unwrap(), std::slice::from_ref(&added));
        assert_eq!(s.token_issuer(ISSUER).unwrap(), Some(added));
        assert_eq!(
            s.token_issuer(&format!("{ISSUER}/")).unwrap(),
            None,
            "issuers match exactly"
        );
        let refused = |s: &mut Store, issuer: &str, jwks: Option<&str>, algs: &[String], scopes: &[ApiScope]| {
            let e = s.add_token_issuer(issuer, jwks, algs, scopes).unwrap_err();
            assert!(
                matches!(e, Error::InvalidInput { .. }),
                "{issuer} {jwks:?} {algs:?}: {e}"
            );
        };
        refused(&mut s, ISSUER, None, &es256(), &ApiScope::ALL); // twice
        for bad in [
            "http://login.example.com",
            "ftp://127.0.0.1",
            "https://a.example?x=1",
            "https://a.example#f",
            "https://user:pw@a.example",
            "not a url",
            "",
        ] {
            refused(&mut s, bad, None, &es256(), &ApiScope::ALL);
            refused(&mut s, "https://b.example", Some(bad), &es256(), &ApiScope::ALL);
        }
        for bad in ["HS256", "none", "es256", ""] {
            refused(&mut s, "https://b.example", None, &[bad.into()], &ApiScope::ALL);
        }
        refused(&mut s, "https://b.example", None, &[], &ApiScope::ALL);
        refused(&mut s, "https://b.example", None, &es256(), &[]);
        // Loopback may be plain http (a local authorization server).
        for ok in ["http://127.0.0.1:9000", "http://localhost:9000/as", "http://[::1]:9000"] {
            s.add_token_issuer(
                ok,
                Some(&format!("{ok}/jwks")),
                &es256(),
                &[ApiScope::CommunicationRead],
            )
            .unwrap();
        }
        // The URL bound, at the limit and one past.
        let at = format!(
            "https://a.example/{}",
            "p".repeat(MAX_ISSUER_URL_BYTES - "https://a.example/".len())
        );
        s.add_token_issuer(&at, None, &es256(), &ApiScope::ALL).unwrap();
        refused(&mut s, &format!("{at}p"), None, &es256(), &ApiScope::ALL);
        assert_eq!(s.remove_token_issuer(ISSUER).unwrap().issuer, ISSUER);
        assert!(s.remove_token_issuer(ISSUER).is_err());
        assert_eq!(s.list_token_issuers().unwrap().len(), 4);
    }

    #[test]
    fn the_issuer_count_is_bounded() {
        let mut s = crate::testing::store().unwrap();
        for i in 0..MAX_TOKEN_ISSUERS {
            s.add_token_issuer(&format!("https://as{i}.example"), None, &es256(), &ApiScope::ALL)
                .unwrap();
        }
        let e = s
            .add_token_issuer("https://one-more.example", None, &es256(), &ApiScope::ALL)
            .unwrap_err();
        assert!(matches!(e, Error::InvalidInput { .. }), "{e}");
    }

    #[test]
    fn a_subject_becomes_one_principal_until_revoked_or_its_issuer_removed() {
        let mut s = crate::testing::store().unwrap();
        s.add_token_issuer(
            ISSUER,
            None,
            &es256(),
            &[ApiScope::CommunicationRead, ApiScope::CommunicationManage],
        )
        .unwrap();
        let alice = s.token_principal(ISSUER, "alice").unwrap().unwrap();
        assert!(alice.name.starts_with(TOKEN_PRINCIPAL_NAME_PREFIX), "{}", alice.name);
        assert_eq!(
            alice.scopes,
            [ApiScope::CommunicationRead, ApiScope::CommunicationManage]
        );
        // The same subject again is the same principal; another subject another one.
        assert_eq!(s.token_principal(ISSUER, "alice").unwrap().unwrap().id, alice.id);
        let bob = s.token_principal(ISSUER, "bob").unwrap().unwrap();
        assert_ne!(bob.id, alice.id);
        // An unknown issuer makes no principal.
        assert_eq!(s.token_principal("https://other.example", "alice").unwrap(), None);
        assert_eq!(s.list_principals().unwrap().len(), 2);
        // Subjects are bounded before anything is written.
        let at = "s".repeat(MAX_TOKEN_SUBJECT_BYTES);
        s.token_principal(ISSUER, &at).unwrap().unwrap();
        for bad in [format!("{at}s"), String::new(), "a\nb".into()] {
            assert!(matches!(
                s.token_principal(ISSUER, &bad),
                Err(Error::InvalidInput { .. })
            ));
        }
        assert_eq!(s.list_principals().unwrap().len(), 3);
        // Revoking the principal refuses the subject, and no new principal replaces it.
        s.revoke_principal(&alice.name).unwrap();
        assert_eq!(s.token_principal(ISSUER, "alice").unwrap(), None);
        assert_eq!(s.list_principals().unwrap().len(), 3);
        // Removing the issuer refuses its subjects; adding it back finds the same principals.
        s.remove_token_issuer(ISSUER).unwrap();
        assert_eq!(s.token_principal(ISSUER, "bob").unwrap(), None);
        s.add_token_issuer(ISSUER, None, &es256(), &[ApiScope::CommunicationRead])
            .unwrap();
        let again = s.token_principal(ISSUER, "bob").unwrap().unwrap();
        assert_eq!(again.id, bob.id);
        assert_eq!(
            again.scopes,
            [ApiScope::CommunicationRead],
            "the issuer's scopes now bound it"
        );
        // No API key authenticates as a token principal.
        let hash: String = s
            .autocommit()
            .query_row("SELECT key_hash FROM principals WHERE id = ?1", [&bob.id], |r| r.get(0))
            .unwrap();
        assert_eq!(hash.len(), 64);
    }
}
