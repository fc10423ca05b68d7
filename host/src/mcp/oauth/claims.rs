//! What an access token says: its shape, the issuer it claims before it is verified (to pick the
//! keys to verify it with), and, once verified, its subject and the ahp scopes it grants.
//!
//! Everything here is bounded before any work: a token longer than [`MAX_TOKEN_BYTES`] or not
//! three base64url segments is refused without decoding; the unverified peek decodes only the
//! payload of a token within that bound, and reads only `iss`.

use ahp_store::ApiScope;
use base64::Engine as _;
use serde::Deserialize;

/// Longest access token considered, in bytes: a JWT with a few dozen claims and an RSA-4096
/// signature fits many times over.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Whether `token` has a compact JWS's shape: at most [`MAX_TOKEN_BYTES`], three non-empty
/// base64url segments separated by dots.
pub fn has_jwt_shape(token: &str) -> bool {
    let segment = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    token.len() <= MAX_TOKEN_BYTES && token.split('.').count() == 3 && token.split('.').all(segment)
}

/// The `iss` a token claims, read without verifying anything: only to choose which issuer's
/// keys to verify it with (the verification then requires that very `iss`). `None` for a
/// token without one, or not of a JWT's shape.
pub fn claimed_issuer(token: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Peek {
        iss: String,
    }
    if !has_jwt_shape(token) {
        return None;
    }
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).ok()?;
    serde_json::from_slice::<Peek>(&bytes).ok().map(|p| p.iss)
}

/// The claims ahp reads from a verified token (RFC 9068): `iss`, `aud`, `exp` and `nbf` are
/// checked by the verification itself.
#[derive(Debug, Deserialize)]
pub struct Claims {
    /// The subject: who the token speaks for.
    pub sub: String,
    /// RFC 9068's space-separated scopes.
    #[serde(default)]
    pub scope: Option<String>,
    /// The scopes as some issuers spell them (`scp`: a list, or a space-separated string).
    #[serde(default)]
    pub scp: Option<Scp>,
}

/// The `scp` claim in either spelling.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Scp {
    /// `["transfer:read", …]`.
    List(Vec<String>),
    /// `"transfer:read …"`.
    Text(String),
}

impl Claims {
    /// The ahp scopes the token grants: those of its `scope` (or `scp`) that name an ahp scope;
    /// any other scope (`openid`, another resource's) is ignored.
    pub fn scopes(&self) -> Vec<ApiScope> {
        let words: Vec<&str> = match (&self.scope, &self.scp) {
            (Some(s), _) | (None, Some(Scp::Text(s))) => s.split_whitespace().collect(),
            (None, Some(Scp::List(l))) => l.iter().map(String::as_str).collect(),
            (None, None) => Vec::new(),
        };
        let mut scopes: Vec<ApiScope> = words.into_iter().filter_map(|w| w.parse().ok()).collect();
        scopes.sort();
        scopes.dedup();
        scopes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_three_base64url_segments_within_the_bound_are_tokens() {
        let seg = |n: usize| "a".repeat(n);
        let at = format!("{}.{}.{}", seg(10), seg(MAX_TOKEN_BYTES - 22), seg(10));
        assert_eq!(at.len(), MAX_TOKEN_BYTES);
        assert!(has_jwt_shape(&at));
        assert!(!has_jwt_shape(&format!("{at}a")));
        for bad in ["a.b", "a.b.c.d", "a..c", "a.b.c=", "a.b.c+", "a b.c.d", ""] {
            assert!(!has_jwt_shape(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_claimed_issuer_is_read_only_from_a_well_shaped_payload() {
        let enc = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let token = |payload: &str| format!("{}.{}.{}", enc("{}"), enc(payload), enc("sig"));
        assert_eq!(
            claimed_issuer(&token(r#"{"iss":"https://as"}"#)).as_deref(),
            Some("https://as")
        );
        assert_eq!(claimed_issuer(&token(r#"{"iss":7}"#)), None);
        assert_eq!(claimed_issuer(&token("not json")), None);
        assert_eq!(claimed_issuer(&token("{}")), None);
    }

    #[test]
    fn scopes_map_to_ahp_scopes_in_either_claim() {
        let claims = |v: serde_json::Value| serde_json::from_value::<Claims>(v).unwrap().scopes();
        assert_eq!(
            claims(serde_json::json!({"sub": "a", "scope": "openid transfer:read communication:read transfer:read"})),
            [ApiScope::TransferRead, ApiScope::CommunicationRead]
        );
        assert_eq!(
            claims(serde_json::json!({"sub": "a", "scp": ["communication:manage", "x"]})),
            [ApiScope::CommunicationManage]
        );
        assert_eq!(
            claims(serde_json::json!({"sub": "a", "scp": "transfer:meter"})),
            [ApiScope::TransferMeter]
        );
        assert!(claims(serde_json::json!({"sub": "a"})).is_empty());
    }
}
