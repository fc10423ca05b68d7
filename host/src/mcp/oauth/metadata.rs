//! What the server tells an OAuth client: the protected-resource metadata of each surface
//! (RFC 9728), and the `WWW-Authenticate` challenges that point to it.
//!
//! Each surface is its own resource — `/mcp` and `/mcp/conversations` — with its metadata at
//! the well-known path inserted before the surface's path (RFC 9728 §3.1, as the MCP
//! specification requires): `/.well-known/oauth-protected-resource/mcp` and
//! `/.well-known/oauth-protected-resource/mcp/conversations`. Each names its canonical URI
//! (`resource`), the issuers the operator added (`authorization_servers`), the surface's scopes
//! (`scopes_supported`) and `bearer_methods_supported: ["header"]`. Served to anyone: it is what
//! a client reads before it holds a token.

use std::sync::Arc;

use ahp_store::ApiScope;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::ResourceServer;
use crate::shared_store::StoreLock;

/// The well-known path of protected-resource metadata.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata of one surface: its path and scopes.
#[derive(Clone)]
pub struct Surface {
    /// The surface's path (`/mcp`, `/mcp/conversations`).
    pub path: &'static str,
    /// The scopes its tools need.
    pub scopes: &'static [ApiScope],
}

/// The `WWW-Authenticate` value of a `401`: where the metadata is and the surface's scopes, and
/// `error="invalid_token"` with its reason when a token was presented and refused.
pub fn unauthorized(server: &ResourceServer, surface: &Surface, refused: Option<&str>) -> String {
    let scope = surface.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ");
    let mut value = format!(
        r#"Bearer realm="ahp", resource_metadata="{}", scope="{scope}""#,
        server.metadata_url(surface.path)
    );
    if let Some(why) = refused {
        value.push_str(&format!(
            r#", error="invalid_token", error_description="{}""#,
            quotable(why)
        ));
    }
    value
}

/// The `WWW-Authenticate` value of a `403`: the scopes the call needs.
pub fn insufficient_scope(server: &ResourceServer, surface: &Surface, scopes: &[ApiScope]) -> String {
    let scope = scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ");
    format!(
        r#"Bearer realm="ahp", error="insufficient_scope", scope="{scope}", resource_metadata="{}""#,
        server.metadata_url(surface.path)
    )
}

/// `text` as a quoted-string's content: printable ASCII without `"` and `\`, at most 200 bytes.
fn quotable(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .filter(|c| !matches!(c, '"' | '\\'))
        .take(200)
        .collect()
}

/// The metadata routes of both surfaces.
pub fn routes(server: Arc<ResourceServer>, surfaces: [Surface; 2]) -> axum::Router {
    surfaces.into_iter().fold(axum::Router::new(), |router, surface| {
        let path = format!("{WELL_KNOWN}{}", surface.path);
        router.route(
            &path,
            axum::routing::get(document).with_state((server.clone(), surface)),
        )
    })
}

async fn document(State((server, surface)): State<(Arc<ResourceServer>, Surface)>) -> Response {
    let store = server.store.clone();
    let issuers = tokio::task::spawn_blocking(move || store.locked().list_token_issuers()).await;
    let Ok(Ok(issuers)) = issuers else {
        return (StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable").into_response();
    };
    let document = json!({
        "resource": server.resource(surface.path),
        "authorization_servers": issuers.into_iter().map(|i| i.issuer).collect::<Vec<_>>(),
        "scopes_supported": surface.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "bearer_methods_supported": ["header"],
        "resource_name": "ahp",
    });
    ([(header::CONTENT_TYPE, "application/json")], document.to_string()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_reason_cannot_break_the_header() {
        assert_eq!(quotable("bad \"sig\" \\ \n ok"), "bad sig   ok");
        assert_eq!(quotable(&"x".repeat(500)).len(), 200);
    }
}
