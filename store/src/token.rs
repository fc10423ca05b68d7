//! Transfer tokens: short-lived, single-use authorizations for `provision_runtime` and `activate`.
//!
//! A token is minted by an orchestrator process with [`issue_transfer_token`] (or `ahp token
//! issue`) — never by an MCP tool, so nothing the agent can call mints one. It is bound to one
//! transfer and one [`TokenScope`], expires after [`DEFAULT_TOKEN_TTL`] unless told otherwise, and
//! is consumed by a primary-key insert into `used_transfer_tokens` inside the same transaction
//! as the transition it authorizes: the collision on replay *is* the single-use check.
//!
//! # Format
//!
//! ```text
//! ahp2.<transfer id>.<scope>.<expires, µs since epoch>.<nonce: 32 hex>.<bindings>.<mac: 64 hex>
//! ```
//!
//! `mac` is HMAC-SHA256, keyed by the [`TokenKey`], over everything before the last `.`; it is
//! checked in constant time before any other field is believed. `nonce` is 128 random bits and
//! is the token's id in the single-use ledger. No field is secret; the token only proves the key
//! holder minted it.
//!
//! `bindings` ([`TokenBindings`]) fixes what the operation may do: `-` for none, else
//! comma-separated `name=value` pairs — for `provision_runtime` `tier=`, `budget=` (a cap in
//! micro-USD) and `component=`; for `activate` `checksum=` (the snapshot's SHA-256). A request
//! that differs is refused with [`TokenRefusal::Binding`] and changes nothing; the token stays
//! unspent. Tokens of the first format (`ahp1.…`, no bindings field) still verify, unbound:
//! they live at most [`MAX_TOKEN_TTL`], so the compatibility ends an hour after an upgrade.
//!
//! # The key
//!
//! The secret comes from [`TOKEN_SECRET_ENV`] if set, else from the key file
//! [`TOKEN_KEY_FILE`] in the data directory, created on first use with 32 random bytes
//! (hex-encoded) and permissions 0600. Secrets shorter than [`MIN_SECRET_BYTES`] are refused.

use std::fmt;
use std::io::Write;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use ahp_store_sql::Tx;
use hmac::{KeyInit, Mac};

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::id::{self, random_bytes};
use crate::tier::Tier;
pub use crate::token_refusal::{Bound, TokenRefusal};

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Lifetime of a token when the issuer does not say.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(5 * 60);
/// Longest lifetime a token may be issued with: a token is a one-shot authorization, not a credential.
pub const MAX_TOKEN_TTL: Duration = Duration::from_secs(60 * 60);
/// Shortest secret accepted: 256 bits, the HMAC-SHA256 block-strength recommendation.
pub const MIN_SECRET_BYTES: usize = 32;
/// Environment variable holding the shared secret (takes precedence over the key file).
pub const TOKEN_SECRET_ENV: &str = "AHP_TRANSFER_TOKEN_SECRET";
/// Name of the key file inside the data directory.
pub const TOKEN_KEY_FILE: &str = "transfer-token.key";
/// Longest string considered as a token; anything longer is malformed without being parsed.
/// The longest real token (a provision token binding a tier, the largest budget and a digest
/// component) is about 270 bytes.
pub const MAX_TOKEN_LEN: usize = 512;

const VERSION: &str = "ahp2";
/// The first format, without a bindings field: still accepted, as unbound.
const VERSION_UNBOUND: &str = "ahp1";
const NO_BINDINGS: &str = "-";
const NONCE_HEX: usize = 32;
const MAC_HEX: usize = 64;

/// What a token authorizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenScope {
    /// `provision_runtime`.
    ProvisionRuntime,
    /// `activate`.
    Activate,
}

impl TokenScope {
    /// The scope's name inside tokens and on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ProvisionRuntime => "provision_runtime",
            Self::Activate => "activate",
        }
    }
}

impl fmt::Display for TokenScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TokenScope {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "provision_runtime" => Ok(Self::ProvisionRuntime),
            "activate" => Ok(Self::Activate),
            _ => Err(Error::invalid(
                "scope",
                format!("{s:?} is not provision_runtime or activate"),
            )),
        }
    }
}

/// What a token fixes about the operation it authorizes; `None` leaves a parameter free.
/// `tier`, `max_budget_micro_usd` and `component` apply to `provision_runtime` tokens,
/// `checksum` to `activate` tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenBindings {
    /// The only tier `provision_runtime` may pick.
    pub tier: Option<Tier>,
    /// The largest budget `provision_runtime` may open, micro-USD.
    pub max_budget_micro_usd: Option<u64>,
    /// The only component reference (name or digest, exactly as sent) `provision_runtime` may
    /// record.
    pub component: Option<String>,
    /// The snapshot checksum `activate` requires (lowercase hex SHA-256).
    pub checksum: Option<String>,
}

impl TokenBindings {
    fn validate(&self, scope: TokenScope) -> Result<()> {
        let provision_only = self.tier.is_some() || self.max_budget_micro_usd.is_some() || self.component.is_some();
        if provision_only && scope != TokenScope::ProvisionRuntime {
            return Err(Error::invalid(
                "bindings",
                "tier, budget and component bind only provision_runtime tokens",
            ));
        }
        if self.checksum.is_some() && scope != TokenScope::Activate {
            return Err(Error::invalid("bindings", "a checksum binds only activate tokens"));
        }
        if let Some(b) = self.max_budget_micro_usd
            && (b == 0 || b > crate::input::MAX_BUDGET_MICRO_USD)
        {
            return Err(Error::invalid(
                "maxBudgetMicroUsd",
                format!("must be 1 to {}", crate::input::MAX_BUDGET_MICRO_USD),
            ));
        }
        if let Some(c) = &self.component {
            crate::input::validate_component(c)?;
        }
        if let Some(c) = &self.checksum
            && !is_checksum(c)
        {
            return Err(Error::invalid("checksum", "must be 64 lowercase hex digits"));
        }
        Ok(())
    }

    /// The bindings field of a token.
    fn encode(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.tier {
            parts.push(format!("tier={t}"));
        }
        if let Some(b) = self.max_budget_micro_usd {
            parts.push(format!("budget={b}"));
        }
        if let Some(c) = &self.component {
            parts.push(format!("component={c}"));
        }
        if let Some(c) = &self.checksum {
            parts.push(format!("checksum={c}"));
        }
        if parts.is_empty() {
            NO_BINDINGS.to_owned()
        } else {
            parts.join(",")
        }
    }

    /// Parses a bindings field (of an authentic token: any failure is a malformed token).
    fn decode(field: &str) -> Option<Self> {
        let mut b = Self::default();
        if field == NO_BINDINGS {
            return Some(b);
        }
        for part in field.split(',') {
            let (name, value) = part.split_once('=')?;
            match name {
                "tier" if b.tier.is_none() => b.tier = Some(value.parse().ok()?),
                "budget" if b.max_budget_micro_usd.is_none() => b.max_budget_micro_usd = Some(value.parse().ok()?),
                "component" if b.component.is_none() => b.component = Some(value.to_owned()),
                "checksum" if b.checksum.is_none() => b.checksum = Some(value.to_owned()),
                _ => return None,
            }
        }
        Some(b)
    }
}

fn is_checksum(c: &str) -> bool {
    c.len() == 64 && c.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// What an operation asks for, checked against a token's [`TokenBindings`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Requested<'a> {
    /// `provision_runtime`'s parameters.
    Provision {
        tier: Tier,
        budget_micro_usd: u64,
        component: &'a str,
    },
    /// The checksum of the snapshot being activated.
    Activate { checksum: &'a str },
}

impl TokenBindings {
    /// The first parameter of `req` this token does not allow.
    fn refuse(&self, req: Requested<'_>) -> Option<Bound> {
        match req {
            Requested::Provision {
                tier,
                budget_micro_usd,
                component,
            } => {
                if self.tier.is_some_and(|t| t != tier) {
                    Some(Bound::Tier)
                } else if self.max_budget_micro_usd.is_some_and(|cap| budget_micro_usd > cap) {
                    Some(Bound::Budget)
                } else if self.component.as_deref().is_some_and(|c| c != component) {
                    Some(Bound::Component)
                } else {
                    None
                }
            }
            Requested::Activate { checksum } => self
                .checksum
                .as_deref()
                .is_some_and(|c| c != checksum)
                .then_some(Bound::Checksum),
        }
    }
}

/// The shared secret that signs and verifies transfer tokens. Its `Debug` never shows the secret.
#[derive(Clone)]
pub struct TokenKey(Vec<u8>);

impl fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenKey(<redacted>)")
    }
}

impl TokenKey {
    /// A key from raw secret bytes.
    ///
    /// # Errors
    ///
    /// [`Error::TokenKey`] if the secret is shorter than [`MIN_SECRET_BYTES`].
    pub fn new(secret: impl Into<Vec<u8>>) -> Result<Self> {
        let secret = secret.into();
        if secret.len() < MIN_SECRET_BYTES {
            return Err(Error::TokenKey(format!(
                "secret is {} bytes; at least {MIN_SECRET_BYTES} are required",
                secret.len()
            )));
        }
        Ok(Self(secret))
    }

    /// A fresh random key (for tests and throwaway demo databases).
    pub fn random() -> Self {
        Self(hex::encode(random_bytes::<32>()).into_bytes())
    }

    /// The key from [`TOKEN_SECRET_ENV`] if set, else from the key file in `data_dir`, which
    /// is created (0600) if it does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::TokenKey`] for a short secret or a key file others can read; [`Error::Io`] if
    /// the file cannot be read or created.
    pub fn from_env_or_file(data_dir: &Path) -> Result<Self> {
        match std::env::var_os(TOKEN_SECRET_ENV) {
            Some(v) => {
                Self::new(v.into_encoded_bytes()).map_err(|e| Error::TokenKey(format!("{TOKEN_SECRET_ENV}: {e}")))
            }
            None => Self::load_or_create(&data_dir.join(TOKEN_KEY_FILE)),
        }
    }

    /// Reads the key file at `path`, creating it with a random secret and mode 0600 if absent.
    ///
    /// # Errors
    ///
    /// As [`from_env_or_file`](Self::from_env_or_file).
    pub fn load_or_create(path: &Path) -> Result<Self> {
        let io = |context: &str| {
            let context = format!("{context} {}", path.display());
            move |source| Error::Io { context, source }
        };
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        match opts.open(path) {
            Ok(mut f) => {
                let key = Self::random();
                f.write_all(&key.0)
                    .and_then(|()| f.sync_all())
                    .map_err(io("writing key file"))?;
                Ok(key)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    let mode = std::fs::metadata(path)
                        .map_err(io("reading key file"))?
                        .permissions()
                        .mode();
                    if mode & 0o077 != 0 {
                        return Err(Error::TokenKey(format!(
                            "{} is readable by others (mode {:o}); run chmod 600 on it",
                            path.display(),
                            mode & 0o777
                        )));
                    }
                }
                let bytes = std::fs::read(path).map_err(io("reading key file"))?;
                let trimmed = bytes.trim_ascii_end().to_vec();
                Self::new(trimmed).map_err(|e| Error::TokenKey(format!("{}: {e}", path.display())))
            }
            Err(e) => Err(io("creating key file")(e)),
        }
    }

    fn mac(&self, signed: &str) -> HmacSha256 {
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.0).expect("HMAC accepts any key length");
        mac.update(signed.as_bytes());
        mac
    }
}

/// Mints an unbound token for `scope` on `transfer`, valid from `now` for `ttl` (see
/// [`issue_bound_transfer_token`] to fix its parameters).
///
/// # Errors
///
/// [`Error::InvalidInput`] if `transfer` is not a transfer id or `ttl` is zero or longer than
/// [`MAX_TOKEN_TTL`].
///
/// ```
/// use ahp_store::{issue_transfer_token, TokenKey, TokenScope, DEFAULT_TOKEN_TTL, Timestamp};
/// let key = TokenKey::new(*b"0123456789abcdef0123456789abcdef").unwrap();
/// let token = issue_transfer_token(&key, "tr_000000000000000000000000", TokenScope::Activate,
///     Timestamp::from_micros(0), DEFAULT_TOKEN_TTL).unwrap();
/// assert!(token.starts_with("ahp2.tr_000000000000000000000000.activate.300000000."));
/// assert!(issue_transfer_token(&key, "agt_1", TokenScope::Activate,
///     Timestamp::from_micros(0), DEFAULT_TOKEN_TTL).is_err());
/// ```
pub fn issue_transfer_token(
    key: &TokenKey,
    transfer: &str,
    scope: TokenScope,
    now: Timestamp,
    ttl: Duration,
) -> Result<String> {
    issue_bound_transfer_token(key, transfer, scope, now, ttl, &TokenBindings::default())
}

/// Mints a token for `scope` on `transfer`, valid from `now` for `ttl`, that allows only what
/// `bindings` fixes: a `provision_runtime` request with another tier or component or a budget
/// over the cap, or an `activate` of a snapshot with another checksum, is refused.
///
/// # Errors
///
/// As [`issue_transfer_token`], and [`Error::InvalidInput`] for a binding the scope does not
/// have (a tier on an `activate` token, a checksum on a `provision_runtime` token) or a bound
/// value out of its rules.
pub fn issue_bound_transfer_token(
    key: &TokenKey,
    transfer: &str,
    scope: TokenScope,
    now: Timestamp,
    ttl: Duration,
    bindings: &TokenBindings,
) -> Result<String> {
    bindings.validate(scope)?;
    if !id::is_well_formed(transfer, crate::input::TRANSFER_ID_PREFIX) {
        return Err(Error::invalid(
            "transfer",
            format!("{transfer:?} is not a transfer id (tr_…)"),
        ));
    }
    if ttl.is_zero() || ttl > MAX_TOKEN_TTL {
        return Err(Error::invalid(
            "ttl",
            format!("must be between 1µs and {}s", MAX_TOKEN_TTL.as_secs()),
        ));
    }
    let expires = now.saturating_add(ttl).as_micros();
    let nonce = hex::encode(random_bytes::<{ NONCE_HEX / 2 }>());
    let signed = format!("{VERSION}.{transfer}.{scope}.{expires}.{nonce}.{}", bindings.encode());
    let tag = hex::encode(key.mac(&signed).finalize().into_bytes());
    Ok(format!("{signed}.{tag}"))
}

/// A token whose signature, binding and expiry checked out, not yet consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VerifiedToken {
    pub(crate) token_id: String,
    pub(crate) expires_at: Timestamp,
    pub(crate) bindings: TokenBindings,
}

/// Checks `token` for `scope` on `transfer` at `now`, without consuming it.
pub(crate) fn verify(
    key: &TokenKey,
    token: &str,
    transfer: &str,
    scope: TokenScope,
    now: Timestamp,
) -> Result<VerifiedToken, TokenRefusal> {
    if token.len() > MAX_TOKEN_LEN || !token.is_ascii() {
        return Err(TokenRefusal::Malformed);
    }
    let (signed, tag_hex) = token.rsplit_once('.').ok_or(TokenRefusal::Malformed)?;
    // Bindings may hold dots (a component name): they are the last field, taken whole.
    let parts: Vec<&str> = signed.splitn(6, '.').collect();
    let (token_transfer, token_scope, expires, nonce, bindings) = match parts[..] {
        [VERSION, tr, sc, ex, no, b] => (tr, sc, ex, no, Some(b)),
        [VERSION_UNBOUND, tr, sc, ex, no] => (tr, sc, ex, no, None),
        _ => return Err(TokenRefusal::Malformed),
    };
    if nonce.len() != NONCE_HEX || tag_hex.len() != MAC_HEX {
        return Err(TokenRefusal::Malformed);
    }
    let tag = hex::decode(tag_hex).map_err(|_| TokenRefusal::Malformed)?;
    key.mac(signed)
        .verify_slice(&tag)
        .map_err(|_| TokenRefusal::BadSignature)?;
    // Authentic from here on: the fields were written by the key holder.
    if token_transfer != transfer {
        return Err(TokenRefusal::WrongTransfer);
    }
    if token_scope != scope.as_str() {
        return Err(TokenRefusal::WrongScope);
    }
    let expires_at = Timestamp::from_micros(expires.parse().map_err(|_| TokenRefusal::Malformed)?);
    if now >= expires_at {
        return Err(TokenRefusal::Expired);
    }
    let bindings = match bindings {
        Some(field) => TokenBindings::decode(field).ok_or(TokenRefusal::Malformed)?,
        None => TokenBindings::default(),
    };
    Ok(VerifiedToken {
        token_id: nonce.to_owned(),
        expires_at,
        bindings,
    })
}

/// Verifies `token`, checks `requested` against its bindings, and consumes it inside `tx`, the
/// transaction of the transition it authorizes. A refusal consumes nothing.
pub(crate) fn verify_and_consume(
    tx: &Tx<'_>,
    key: Option<&TokenKey>,
    token: &str,
    transfer: &str,
    requested: Requested<'_>,
    now: Timestamp,
) -> Result<()> {
    let key = key.ok_or(Error::NoTokenKey)?;
    let scope = match requested {
        Requested::Provision { .. } => TokenScope::ProvisionRuntime,
        Requested::Activate { .. } => TokenScope::Activate,
    };
    let verified = verify(key, token, transfer, scope, now)?;
    if let Some(bound) = verified.bindings.refuse(requested) {
        return Err(TokenRefusal::Binding(bound).into());
    }
    let inserted = tx
        .prepare_cached(
            "INSERT INTO used_transfer_tokens (token_id, transfer_id, scope, used_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (token_id) DO NOTHING",
        )?
        .execute((
            &verified.token_id,
            transfer,
            scope.as_str(),
            now.as_micros(),
            verified.expires_at.as_micros(),
        ))?;
    if inserted == 0 {
        return Err(TokenRefusal::Replayed.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "tr_0123456789abcdef01234567";

    fn key() -> TokenKey {
        TokenKey::new(*b"an example secret of 32 bytes!!!").unwrap()
    }

    fn token_at(now: i64) -> String {
        issue_transfer_token(
            &key(),
            T,
            TokenScope::Activate,
            Timestamp::from_micros(now),
            DEFAULT_TOKEN_TTL,
        )
        .unwrap()
    }

    #[test]
    fn a_fresh_token_verifies_for_its_transfer_and_scope_only() {
        let now = Timestamp::from_micros(1_000);
        let tok = token_at(1_000);
        assert!(verify(&key(), &tok, T, TokenScope::Activate, now).is_ok());
        assert_eq!(
            verify(&key(), &tok, "tr_ffffffffffffffffffffffff", TokenScope::Activate, now),
            Err(TokenRefusal::WrongTransfer)
        );
        assert_eq!(
            verify(&key(), &tok, T, TokenScope::ProvisionRuntime, now),
            Err(TokenRefusal::WrongScope)
        );
    }

    #[test]
    fn forged_truncated_and_expired_tokens_are_refused() {
        let tok = token_at(0);
        let now = Timestamp::from_micros(1);
        let other = TokenKey::new(vec![7u8; 32]).unwrap();
        assert_eq!(
            verify(&other, &tok, T, TokenScope::Activate, now),
            Err(TokenRefusal::BadSignature)
        );
        // Scope swapped by hand keeps the shape but breaks the MAC.
        let swapped = tok.replace(".activate.", ".provision_runtime.");
        assert_eq!(
            verify(&key(), &swapped, T, TokenScope::ProvisionRuntime, now),
            Err(TokenRefusal::BadSignature)
        );
        assert_eq!(
            verify(&key(), &tok[..tok.len() - 1], T, TokenScope::Activate, now),
            Err(TokenRefusal::Malformed)
        );
        assert_eq!(
            verify(&key(), "", T, TokenScope::Activate, now),
            Err(TokenRefusal::Malformed)
        );
        assert_eq!(
            verify(&key(), &"x".repeat(MAX_TOKEN_LEN + 1), T, TokenScope::Activate, now),
            Err(TokenRefusal::Malformed)
        );
        let at_expiry = Timestamp::from_micros(DEFAULT_TOKEN_TTL.as_micros() as i64);
        assert_eq!(
            verify(&key(), &tok, T, TokenScope::Activate, at_expiry),
            Err(TokenRefusal::Expired)
        );
    }

    #[test]
    fn short_secrets_and_bad_ttls_are_refused() {
        assert!(matches!(TokenKey::new(vec![1u8; 31]), Err(Error::TokenKey(_))));
        let now = Timestamp::from_micros(0);
        assert!(issue_transfer_token(&key(), T, TokenScope::Activate, now, Duration::ZERO).is_err());
        assert!(
            issue_transfer_token(
                &key(),
                T,
                TokenScope::Activate,
                now,
                MAX_TOKEN_TTL + Duration::from_secs(1)
            )
            .is_err()
        );
        assert!(issue_transfer_token(&key(), T, TokenScope::Activate, now, MAX_TOKEN_TTL).is_ok());
    }

    const SUM: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn bound(scope: TokenScope, b: &TokenBindings) -> Result<String> {
        issue_bound_transfer_token(&key(), T, scope, Timestamp::from_micros(0), DEFAULT_TOKEN_TTL, b)
    }

    #[test]
    fn bindings_ride_in_the_signed_token_and_cannot_be_edited() {
        let b = TokenBindings {
            tier: Some(Tier::Nano),
            max_budget_micro_usd: Some(5_000),
            component: Some("forecaster.v2".into()),
            checksum: None,
        };
        let tok = bound(TokenScope::ProvisionRuntime, &b).unwrap();
        assert!(tok.contains(".tier=nano,budget=5000,component=forecaster.v2."), "{tok}");
        let now = Timestamp::from_micros(1);
        let v = verify(&key(), &tok, T, TokenScope::ProvisionRuntime, now).unwrap();
        assert_eq!(v.bindings, b);
        for edited in [
            tok.replace("tier=nano", "tier=large"),
            tok.replace("budget=5000", "budget=9000"),
            tok.replace(".tier=nano,budget=5000,component=forecaster.v2.", ".-."),
        ] {
            assert_eq!(
                verify(&key(), &edited, T, TokenScope::ProvisionRuntime, now),
                Err(TokenRefusal::BadSignature),
                "{edited}"
            );
        }
        let unbound = token_at(0);
        assert!(unbound.contains(".-."), "{unbound}");
        assert_eq!(
            verify(&key(), &unbound, T, TokenScope::Activate, now).unwrap().bindings,
            TokenBindings::default()
        );
    }

    #[test]
    fn a_request_outside_the_bindings_names_what_it_broke() {
        let b = TokenBindings {
            tier: Some(Tier::Small),
            max_budget_micro_usd: Some(100),
            component: Some("forecaster".into()),
            checksum: None,
        };
        let ask = |tier, budget_micro_usd, component| {
            b.refuse(Requested::Provision {
                tier,
                budget_micro_usd,
                component,
            })
        };
        assert_eq!(ask(Tier::Small, 100, "forecaster"), None, "at the cap");
        assert_eq!(ask(Tier::Small, 101, "forecaster"), Some(Bound::Budget), "one past it");
        assert_eq!(ask(Tier::Large, 1, "forecaster"), Some(Bound::Tier));
        assert_eq!(ask(Tier::Small, 1, "sha256:00"), Some(Bound::Component));
        let free = TokenBindings::default();
        assert_eq!(
            free.refuse(Requested::Provision {
                tier: Tier::Large,
                budget_micro_usd: u64::MAX,
                component: "x"
            }),
            None
        );
        let sum = TokenBindings {
            checksum: Some(SUM.into()),
            ..TokenBindings::default()
        };
        assert_eq!(sum.refuse(Requested::Activate { checksum: SUM }), None);
        assert_eq!(
            sum.refuse(Requested::Activate {
                checksum: &"f".repeat(64)
            }),
            Some(Bound::Checksum)
        );
    }

    #[test]
    fn bindings_must_fit_the_scope_and_their_rules() {
        let with = |f: fn(&mut TokenBindings)| {
            let mut b = TokenBindings::default();
            f(&mut b);
            b
        };
        let bad = [
            (TokenScope::Activate, with(|b| b.tier = Some(Tier::Nano))),
            (TokenScope::Activate, with(|b| b.component = Some("forecaster".into()))),
            (TokenScope::ProvisionRuntime, with(|b| b.checksum = Some(SUM.into()))),
            (TokenScope::ProvisionRuntime, with(|b| b.max_budget_micro_usd = Some(0))),
            (
                TokenScope::ProvisionRuntime,
                with(|b| b.max_budget_micro_usd = Some(crate::input::MAX_BUDGET_MICRO_USD + 1)),
            ),
            (
                TokenScope::ProvisionRuntime,
                with(|b| b.component = Some("Bad Name".into())),
            ),
            (TokenScope::Activate, with(|b| b.checksum = Some(SUM.to_uppercase()))),
        ];
        for (scope, b) in bad {
            assert!(
                matches!(bound(scope, &b), Err(Error::InvalidInput { .. })),
                "{scope} {b:?}"
            );
        }
        // The longest token there can be still fits MAX_TOKEN_LEN and verifies.
        let longest = TokenBindings {
            tier: Some(Tier::Small),
            max_budget_micro_usd: Some(crate::input::MAX_BUDGET_MICRO_USD),
            component: Some(format!("sha256:{SUM}")),
            checksum: None,
        };
        let tok = bound(TokenScope::ProvisionRuntime, &longest).unwrap();
        assert!(tok.len() <= MAX_TOKEN_LEN, "{}", tok.len());
        assert!(verify(&key(), &tok, T, TokenScope::ProvisionRuntime, Timestamp::from_micros(1)).is_ok());
    }

    #[test]
    fn first_format_tokens_still_verify_unbound() {
        use hmac::Mac as _;
        let signed = format!("{VERSION_UNBOUND}.{T}.activate.300000000.{}", "ab".repeat(16));
        let tok = format!("{signed}.{}", hex::encode(key().mac(&signed).finalize().into_bytes()));
        let v = verify(&key(), &tok, T, TokenScope::Activate, Timestamp::from_micros(1)).unwrap();
        assert_eq!(v.bindings, TokenBindings::default());
        // A first-format token with a bindings field is not a token.
        let signed = format!("{signed}.tier=nano");
        let tok = format!("{signed}.{}", hex::encode(key().mac(&signed).finalize().into_bytes()));
        assert_eq!(
            verify(&key(), &tok, T, TokenScope::Activate, Timestamp::from_micros(1)),
            Err(TokenRefusal::Malformed)
        );
    }

    #[cfg(unix)]
    #[test]
    fn key_file_is_created_private_and_reloaded() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(TOKEN_KEY_FILE);
        let a = TokenKey::load_or_create(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let b = TokenKey::load_or_create(&path).unwrap();
        assert_eq!(a.0, b.0);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(TokenKey::load_or_create(&path), Err(Error::TokenKey(m)) if m.contains("chmod 600")));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "short").unwrap();
        assert!(matches!(TokenKey::load_or_create(&path), Err(Error::TokenKey(m)) if m.contains("at least 32")));
        assert!(format!("{a:?}").contains("redacted"));
    }
}
