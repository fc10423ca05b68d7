//! An issuer's signing keys: its JWKS, fetched from the operator-configured `jwks_uri` or the
//! one its metadata names, cached, and fetched again when it rotates.
//!
//! A key set is kept for [`KEYS_FRESH_FOR`]; a token whose `kid` the cached set lacks makes one
//! new fetch (the issuer rotated), at most once per [`REFETCH_AT_MOST_EVERY`] per issuer, so a
//! flood of tokens naming unknown keys costs the issuer, and the host, one request per interval.
//! Concurrent requests for one issuer's keys wait on the same fetch. Only an issuer the operator
//! added is ever fetched (the caller looked it up first), so no token makes the host reach an
//! address of the token's choosing.
//!
//! Bounds on what an issuer sends: each response at most [`MAX_KEYS_RESPONSE_BYTES`], read before
//! [`FETCH_TIMEOUT`]; at most [`MAX_KEYS`] keys kept (keys of a type this build cannot use are
//! skipped, not fatal). A failed fetch keeps the keys already cached.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ahp_store::TokenIssuer;
use http::{HeaderMap, HeaderValue, Method};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

use crate::egress::direct::{self, Exchange};

/// How long a fetched key set is used without asking again.
pub const KEYS_FRESH_FOR: Duration = Duration::from_secs(600);
/// Least time between two fetches of one issuer's keys prompted by an unknown `kid`.
pub const REFETCH_AT_MOST_EVERY: Duration = Duration::from_secs(30);
/// Largest metadata or key-set response read, in bytes.
pub const MAX_KEYS_RESPONSE_BYTES: usize = 64 * 1024;
/// Most keys kept from one key set.
pub const MAX_KEYS: usize = 32;
/// Longest wait for one metadata or key-set response, connection included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Why no key could verify a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The issuer's key set has no key for the token (its `kid`, or its algorithm).
    #[error("the issuer has no key {0}")]
    Unknown(String),
    /// The issuer's metadata or key set could not be fetched (and none is cached).
    #[error("the issuer's keys are unavailable: {0}")]
    Unavailable(String),
}

/// One issuer's cached keys.
#[derive(Default)]
struct Cached {
    keys: Vec<Jwk>,
    fetched_at: Option<Instant>,
}

/// Every issuer's cached keys, shared by the gates of both surfaces.
pub struct KeySets {
    issuers: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Cached>>>>,
    refetch_every: Duration,
}

impl Default for KeySets {
    fn default() -> Self {
        Self::refetching_every(REFETCH_AT_MOST_EVERY)
    }
}

impl KeySets {
    /// Key sets fetched again for an unknown `kid` at most once per `interval` (the tests'
    /// clock; [`REFETCH_AT_MOST_EVERY`] otherwise).
    pub fn refetching_every(interval: Duration) -> Self {
        Self {
            issuers: Mutex::default(),
            refetch_every: interval,
        }
    }

    /// The key of `issuer` that verifies a token signed with `alg` under `kid`.
    ///
    /// # Errors
    ///
    /// See [`KeyError`].
    pub async fn key(&self, issuer: &TokenIssuer, alg: Algorithm, kid: Option<&str>) -> Result<DecodingKey, KeyError> {
        let entry = {
            let mut issuers = self.issuers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            issuers.entry(issuer.issuer.clone()).or_default().clone()
        };
        let mut cached = entry.lock().await;
        let now = Instant::now();
        let stale = cached
            .fetched_at
            .is_none_or(|t| now.duration_since(t) >= KEYS_FRESH_FOR);
        let found = pick(&cached.keys, alg, kid);
        let may_refetch = cached
            .fetched_at
            .is_none_or(|t| now.duration_since(t) >= self.refetch_every);
        if stale || (found.is_none() && may_refetch) {
            match fetch(issuer).await {
                Ok(keys) => {
                    cached.keys = keys;
                    cached.fetched_at = Some(Instant::now());
                }
                Err(e) if cached.keys.is_empty() => return Err(KeyError::Unavailable(e)),
                Err(e) => tracing::warn!(issuer = %issuer.issuer, "keeping the cached keys: {e}"),
            }
        }
        let jwk = pick(&cached.keys, alg, kid)
            .ok_or_else(|| KeyError::Unknown(kid.map_or_else(|| format!("for {alg:?}"), |k| format!("{k:?}"))))?;
        DecodingKey::from_jwk(jwk).map_err(|e| KeyError::Unknown(format!("usable for {alg:?}: {e}")))
    }
}

/// The key a token names by `kid`; without a `kid`, the only key of `alg`'s family.
fn pick<'k>(keys: &'k [Jwk], alg: Algorithm, kid: Option<&str>) -> Option<&'k Jwk> {
    match kid {
        Some(kid) => keys.iter().find(|k| k.common.key_id.as_deref() == Some(kid)),
        None => {
            let fits: Vec<&Jwk> = keys.iter().filter(|k| family_fits(k, alg)).collect();
            (fits.len() == 1).then(|| fits[0])
        }
    }
}

fn family_fits(key: &Jwk, alg: Algorithm) -> bool {
    use jsonwebtoken::jwk::AlgorithmParameters as P;
    matches!(
        (&key.algorithm, alg),
        (P::EllipticCurve(_), Algorithm::ES256 | Algorithm::ES384)
            | (
                P::RSA(_),
                Algorithm::RS256
                    | Algorithm::RS384
                    | Algorithm::RS512
                    | Algorithm::PS256
                    | Algorithm::PS384
                    | Algorithm::PS512
            )
            | (P::OctetKeyPair(_), Algorithm::EdDSA)
    )
}

/// GETs `url` as JSON within the bounds.
async fn get_json(url: &str) -> Result<serde_json::Value, String> {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::ACCEPT, HeaderValue::from_static("application/json"));
    let exchange = Exchange {
        method: Method::GET,
        url,
        headers,
        body: Vec::new(),
        max_response_bytes: MAX_KEYS_RESPONSE_BYTES,
        connect_timeout: FETCH_TIMEOUT,
    };
    let (status, body) = direct::send(exchange, Instant::now() + FETCH_TIMEOUT)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if status != 200 {
        return Err(format!("{url} answered {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
}

/// The URLs an issuer's metadata may be at: RFC 8414's (the well-known path inserted before the
/// issuer's path), then OpenID Connect Discovery's (appended).
fn metadata_urls(issuer: &str) -> Vec<String> {
    let mut urls = Vec::new();
    if let Ok(u) = url::Url::parse(issuer) {
        let path = u.path().trim_end_matches('/');
        let origin = u.origin().ascii_serialization();
        urls.push(format!("{origin}/.well-known/oauth-authorization-server{path}"));
    }
    urls.push(format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    ));
    urls
}

/// Where `issuer`'s keys are: the operator's `jwks_uri`, else the one its metadata names (the
/// metadata's `issuer` must be exactly this issuer, RFC 8414 §3.3).
async fn jwks_uri(issuer: &TokenIssuer) -> Result<String, String> {
    if let Some(uri) = &issuer.jwks_uri {
        return Ok(uri.clone());
    }
    #[derive(Deserialize)]
    struct Metadata {
        issuer: String,
        jwks_uri: String,
    }
    let mut why = Vec::new();
    for url in metadata_urls(&issuer.issuer) {
        match get_json(&url)
            .await
            .and_then(|v| serde_json::from_value::<Metadata>(v).map_err(|e| format!("{url}: {e}")))
        {
            Ok(m) if m.issuer != issuer.issuer => why.push(format!("{url} names issuer {:?}", m.issuer)),
            Ok(m) => {
                ahp_store::issuer::check_url("jwks_uri", &m.jwks_uri).map_err(|e| format!("{url}: {e}"))?;
                return Ok(m.jwks_uri);
            }
            Err(e) => why.push(e),
        }
    }
    Err(why.join("; "))
}

/// Fetches `issuer`'s key set: the usable keys, at most [`MAX_KEYS`].
async fn fetch(issuer: &TokenIssuer) -> Result<Vec<Jwk>, String> {
    #[derive(Deserialize)]
    struct Set {
        keys: Vec<serde_json::Value>,
    }
    let uri = jwks_uri(issuer).await?;
    let set: Set = serde_json::from_value(get_json(&uri).await?).map_err(|e| format!("{uri}: {e}"))?;
    Ok(set
        .keys
        .into_iter()
        .filter_map(|k| serde_json::from_value::<Jwk>(k).ok())
        .take(MAX_KEYS)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_both_specifications_put_it() {
        assert_eq!(
            metadata_urls("https://as.example/tenant/1"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant/1",
                "https://as.example/tenant/1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("http://127.0.0.1:9000"),
            [
                "http://127.0.0.1:9000/.well-known/oauth-authorization-server",
                "http://127.0.0.1:9000/.well-known/openid-configuration",
            ]
        );
    }
}
