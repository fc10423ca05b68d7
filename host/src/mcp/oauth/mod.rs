//! The HTTP transport as an OAuth 2.1 resource server, as the MCP specification's authorization
//! (2025-11-25, 2026-07-28) has it, beside API keys: a client that speaks the specification
//! finds the authorization servers in the protected-resource metadata ([`metadata`], RFC 9728),
//! obtains an access token for this server, and presents it as `Authorization: Bearer <JWT>`.
//!
//! A token is accepted only if every check passes, in this order, each before anything costlier:
//!
//! 1. its shape: a compact JWS of at most [`claims::MAX_TOKEN_BYTES`] (no decoding otherwise);
//! 2. its claimed `iss` is exactly an issuer the operator added (`ahp auth issuer add`; one
//!    store read) — so no token makes the host fetch from an address it chose;
//! 3. its header's `alg` is one the operator allowed for that issuer (asymmetric only);
//! 4. the issuer's key named by its `kid` (the issuer's JWKS, cached: [`keys`]) verifies its
//!    signature;
//! 5. `iss` is that issuer, `aud` names this surface's canonical resource URI
//!    ([`ResourceServer::resource`]: the public URL and the surface's path — a token for
//!    `/mcp` is no token for `/mcp/conversations`), `exp` is in the future and `nbf`, if any, in
//!    the past (both with [`LEEWAY`]), and `sub` is present;
//! 6. the subject's principal ([`ahp_store::issuer`]) stands (not revoked; the issuer not
//!    removed).
//!
//! The request then acts as that principal with the scopes both the token grants
//! ([`claims::Claims::scopes`]) and the issuer allows — owning, hiding and seeing exactly as an
//! API key's principal. A failed check is `401` with `error="invalid_token"`; an issuer whose keys
//! cannot be fetched is `503`. The token is never passed on: nothing the host sends downstream
//! (model providers, MCP servers, egress) carries the client's `Authorization`.

pub mod claims;
pub mod keys;
pub mod metadata;
#[cfg(test)]
mod tests;

use std::time::Duration;

use ahp_store::{Principal, TokenIssuer};
use jsonwebtoken::{Algorithm, Validation};

use crate::shared_store::{SharedStore, StoreLock};

/// Clock skew tolerated on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(30);

/// Why a bearer token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a token this server accepts (`401`, `error="invalid_token"`), and why.
    Invalid(String),
    /// The store, or the issuer's keys, could not be read (`503`): nothing was decided.
    Unavailable(String),
}

/// Where the server is reached, and the issuers' keys: what the gates of both surfaces share.
pub struct ResourceServer {
    origin: String,
    store: SharedStore,
    keys: keys::KeySets,
}

impl ResourceServer {
    /// The resource server of the host reached at `public` (an origin: scheme, host, port).
    ///
    /// # Errors
    ///
    /// If `public` is not an `http` or `https` origin (a path, query or fragment, or
    /// credentials).
    pub fn new(public: &url::Url, store: SharedStore) -> anyhow::Result<Self> {
        check_origin(public)?;
        Ok(Self {
            origin: public.origin().ascii_serialization(),
            store,
            keys: keys::KeySets::default(),
        })
    }

    /// This server with its issuers' key sets fetched again for an unknown `kid` at most once
    /// per `interval`.
    #[cfg(test)]
    pub(crate) fn refetching_every(mut self, interval: Duration) -> Self {
        self.keys = keys::KeySets::refetching_every(interval);
        self
    }

    /// The canonical resource URI of the surface at `path`: what a token's `aud` must name.
    pub fn resource(&self, path: &str) -> String {
        format!("{}{path}", self.origin)
    }

    /// The URL of the surface's protected-resource metadata (RFC 9728 §3.1: the well-known path
    /// inserted before the resource's path).
    pub fn metadata_url(&self, path: &str) -> String {
        format!("{}{}{path}", self.origin, metadata::WELL_KNOWN)
    }

    /// The principal a bearer `token` presented at the surface at `path` acts as, with the
    /// scopes it may use there.
    ///
    /// # Errors
    ///
    /// See [`Refusal`].
    pub async fn authenticate(&self, token: &str, path: &str) -> Result<Principal, Refusal> {
        let invalid = |why: &str| Refusal::Invalid(why.to_owned());
        let Some(iss) = claims::claimed_issuer(token) else {
            return Err(invalid("not a JWT with an issuer"));
        };
        let issuer = self
            .read(move |s| s.token_issuer(&iss))
            .await?
            .ok_or_else(|| invalid("unknown issuer"))?;
        let header = jsonwebtoken::decode_header(token).map_err(|e| Refusal::Invalid(format!("bad header: {e}")))?;
        if !allowed(&issuer, header.alg) {
            return Err(Refusal::Invalid(format!(
                "algorithm {:?} not allowed for this issuer",
                header.alg
            )));
        }
        let key = self
            .keys
            .key(&issuer, header.alg, header.kid.as_deref())
            .await
            .map_err(|e| match e {
                keys::KeyError::Unknown(_) => Refusal::Invalid(e.to_string()),
                keys::KeyError::Unavailable(_) => Refusal::Unavailable(e.to_string()),
            })?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&issuer.issuer]);
        validation.set_audience(&[self.resource(path)]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = LEEWAY.as_secs();
        validation.validate_nbf = true;
        let token = jsonwebtoken::decode::<claims::Claims>(token, &key, &validation)
            .map_err(|e| Refusal::Invalid(e.to_string()))?;
        let granted = token.claims.scopes();
        let subject = token.claims.sub;
        let issuer = issuer.issuer;
        let principal = self
            .read(move |s| match s.token_principal(&issuer, &subject) {
                Err(ahp_store::Error::InvalidInput { reason, .. }) => Ok(Err(reason)),
                other => other.map(Ok),
            })
            .await?
            .map_err(Refusal::Invalid)?
            .ok_or_else(|| invalid("the subject's principal is revoked, or its issuer removed"))?;
        Ok(Principal {
            scopes: principal.scopes.into_iter().filter(|s| granted.contains(s)).collect(),
            ..principal
        })
    }

    /// Runs `f` on the store off the async threads.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut ahp_store::Store) -> ahp_store::Result<T> + Send + 'static,
    ) -> Result<T, Refusal> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || f(&mut store.locked())).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Refusal::Unavailable(format!("the store failed: {e}"))),
            Err(_) => Err(Refusal::Unavailable("the store read was interrupted".into())),
        }
    }
}

/// Checks that `public` is an `http` or `https` origin: no path, query, fragment or
/// credentials (a surface's resource URI is the origin and the surface's path).
///
/// # Errors
///
/// Saying what is wrong.
pub fn check_origin(public: &url::Url) -> anyhow::Result<()> {
    anyhow::ensure!(
        matches!(public.scheme(), "http" | "https")
            && public.host().is_some()
            && public.path() == "/"
            && public.query().is_none()
            && public.fragment().is_none()
            && public.username().is_empty()
            && public.password().is_none(),
        "the public URL must be an origin (scheme://host[:port]), not {public}"
    );
    Ok(())
}

/// Whether `issuer` allows tokens signed with `alg`.
fn allowed(issuer: &TokenIssuer, alg: Algorithm) -> bool {
    issuer
        .algorithms
        .iter()
        .any(|a| a.parse::<Algorithm>().is_ok_and(|a| a == alg))
}
