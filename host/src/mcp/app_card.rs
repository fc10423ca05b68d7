//! The MCP Apps UI resources the conversation surface serves (extension
//! `io.modelcontextprotocol/ui`): the agent-continuation card
//! ([`CONTINUATION_URI`]) and the Goal Plan card ([`GOAL_PLAN_URI`]), each one self-contained
//! `text/html;profile=mcp-app` document.
//!
//! A card is the template `host/assets/card.html` with its style and one inline module script:
//! the official MCP Apps SDK's View side, vendored (`host/assets/ext-apps/`, its SHA-256 pinned
//! here), then the card's own code (`host/assets/agent-continuation.js`,
//! `host/assets/goal-plan.js`) in a block of its own, so that none of its names can collide
//! with the bundle's minified ones. The SDK bundle's closing `export{…}` becomes a `const
//! ExtApps` so the card's code, in the same module, can use it. The document's Content Security Policy
//! allows exactly that script and that style, by their SHA-256, and nothing else: no remote
//! script, no connection (the View reaches the server only through its host), no frame, no
//! form. The resource's `_meta.ui.csp` asks the host for no external domain either.

use std::sync::LazyLock;

use base64::Engine;
use rmcp::model::{MetaObject, Resource, ResourceContents};
use serde_json::json;
use sha2::{Digest, Sha256};

/// The agent-continuation card: the MCP App pull carrier of one agent's wakes.
pub const CONTINUATION_URI: &str = "ui://ahp/agent-continuation/v1";
/// The Goal Plan card: a goal's plan and progress, observed.
pub const GOAL_PLAN_URI: &str = "ui://ahp/goal-plan/v1";
/// The MIME type of an MCP Apps HTML resource.
pub const APP_MIME: &str = "text/html;profile=mcp-app";

/// The MCP Apps extension's id, in the server's `extensions` capability.
pub const UI_EXTENSION_ID: &str = "io.modelcontextprotocol/ui";

/// The extension's settings this server declares: the MIME type of its UI resources.
pub fn ui_extension() -> rmcp::model::JsonObject {
    json!({ "mimeTypes": [APP_MIME] })
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// SHA-256 of the vendored `@modelcontextprotocol/ext-apps` 2.0.4 `app-with-deps.js`.
pub const EXT_APPS_SHA256: &str = "d24b6ae50dbc989539db8287e217f41f0833f2b0a81ac4c6dbde444715ef5cd0";

const EXT_APPS: &str = include_str!("../../assets/ext-apps/app-with-deps.js");
const TEMPLATE: &str = include_str!("../../assets/card.html");
const STYLE: &str = include_str!("../../assets/card.css");
const CONTINUATION_JS: &str = include_str!("../../assets/agent-continuation.js");
const GOAL_PLAN_JS: &str = include_str!("../../assets/goal-plan.js");

/// One card: its resource URI, its title and its whole document.
#[derive(Debug)]
pub struct Card {
    /// `ui://ahp/…`.
    pub uri: &'static str,
    /// What it shows.
    pub title: &'static str,
    /// The self-contained HTML document.
    pub html: String,
}

/// The cards, built once.
pub static CARDS: LazyLock<Vec<Card>> = LazyLock::new(|| {
    let sdk = sdk_in_scope(EXT_APPS).expect("the vendored MCP Apps SDK ends with its exports");
    vec![
        Card {
            uri: CONTINUATION_URI,
            title: "Agent continuation",
            html: document("Agent continuation", &sdk, CONTINUATION_JS),
        },
        Card {
            uri: GOAL_PLAN_URI,
            title: "Goal plan",
            html: document("Goal plan", &sdk, GOAL_PLAN_JS),
        },
    ]
});

/// The card at `uri`, if it is one.
pub fn card(uri: &str) -> Option<&'static Card> {
    CARDS.iter().find(|c| c.uri == uri)
}

/// The SDK bundle with its closing `export{a as B,…};` turned into `const ExtApps={B:a,…};`.
fn sdk_in_scope(bundle: &str) -> Option<String> {
    let start = bundle.rfind("export{")?;
    let body = bundle[start + "export{".len()..].trim_end().strip_suffix("};")?;
    let mut fields = Vec::new();
    for item in body.split(',') {
        let (local, exported) = match item.split_once(" as ") {
            Some((l, e)) => (l.trim(), e.trim()),
            None => (item.trim(), item.trim()),
        };
        let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
        if !ident(local) || !ident(exported) {
            return None;
        }
        fields.push(format!("{exported}:{local}"));
    }
    Some(format!("{}const ExtApps={{{}}};", &bundle[..start], fields.join(",")))
}

fn sha256_base64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()))
}

/// The card's document: the template with its title, style, script and the policy that allows
/// exactly them.
fn document(title: &str, sdk: &str, code: &str) -> String {
    // The card's code in a block of its own: its top-level names never collide with the
    // minified bundle's (which the module's top level holds).
    let script = format!("{sdk}\n{{\n{code}\n}}");
    assert!(
        !script.contains("</script") && !STYLE.contains("</style"),
        "an inline script or style must not close its element"
    );
    let csp = format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; img-src data:; base-uri 'none'; form-action 'none'",
        sha256_base64(&script),
        sha256_base64(STYLE),
    );
    TEMPLATE
        .replace("{{CSP}}", &csp)
        .replace("{{TITLE}}", title)
        .replace("{{STYLE}}", STYLE)
        .replace("{{SCRIPT}}", &script)
}

/// The `_meta` of a card resource: no external domain for the host's policy, a border.
fn ui_meta() -> MetaObject {
    let meta = json!({ "ui": { "csp": { "connectDomains": [], "resourceDomains": [] }, "prefersBorder": true } });
    MetaObject(meta.as_object().cloned().unwrap_or_default())
}

/// The cards as `resources/list` lists them.
pub fn listed() -> Vec<Resource> {
    CARDS
        .iter()
        .map(|c| {
            Resource::new(c.uri, c.title)
                .with_mime_type(APP_MIME)
                .with_size(c.html.len() as u64)
                .with_meta(ui_meta())
        })
        .collect()
}

/// A card's contents as `resources/read` returns them.
pub fn contents(c: &Card) -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri: c.uri.to_owned(),
        mime_type: Some(APP_MIME.to_owned()),
        text: c.html.clone(),
        meta: Some(ui_meta()),
    }
}

/// The `_meta` of a tool that presents `uri` (its `ui.resourceUri`, and the key older hosts read).
pub fn presents(uri: &str) -> MetaObject {
    let meta = json!({ "ui": { "resourceUri": uri }, "ui/resourceUri": uri });
    MetaObject(meta.as_object().cloned().unwrap_or_default())
}

/// The `_meta` of an app-only tool: callable by the card, hidden from the model.
pub fn app_only() -> MetaObject {
    let meta = json!({ "ui": { "visibility": ["app"] } });
    MetaObject(meta.as_object().cloned().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_sdk_is_the_pinned_release() {
        assert_eq!(hex::encode(Sha256::digest(EXT_APPS.as_bytes())), EXT_APPS_SHA256);
    }

    #[test]
    fn each_card_is_self_contained_and_its_policy_allows_exactly_its_script_and_style() {
        for c in CARDS.iter() {
            let html = &c.html;
            assert!(!html.contains("{{"), "{}: a placeholder is left", c.uri);
            // One script, inline, of a module; no src anywhere, no remote URL to load.
            assert_eq!(html.matches("<script").count(), 1, "{}", c.uri);
            assert!(html.contains("<script type=\"module\">"));
            assert!(!html.contains(" src="), "{}", c.uri);
            let start = html.find("<script type=\"module\">").unwrap() + "<script type=\"module\">".len();
            let end = html[start..].find("</script>").unwrap() + start;
            let script = &html[start..end];
            let policy = format!("script-src 'sha256-{}'", sha256_base64(script));
            assert!(html.contains(&policy), "{}: the policy does not pin its script", c.uri);
            assert!(html.contains(&format!("style-src 'sha256-{}'", sha256_base64(STYLE))));
            assert!(html.contains("default-src 'none'"));
            assert!(
                script.contains("const ExtApps={") && script.contains("App:"),
                "{}",
                c.uri
            );
            assert!(!script.contains("export{"), "{}: the bundle still exports", c.uri);
        }
        assert!(card(CONTINUATION_URI).is_some() && card(GOAL_PLAN_URI).is_some());
        assert!(card("ui://ahp/other").is_none());
    }

    #[test]
    fn an_export_list_becomes_a_const_and_anything_else_is_refused() {
        assert_eq!(
            sdk_in_scope("var a=1;export{a as App,b};").as_deref(),
            Some("var a=1;const ExtApps={App:a,b:b};")
        );
        assert_eq!(sdk_in_scope("var a=1;"), None);
        assert_eq!(sdk_in_scope("export{a as App};alert(1)"), None);
        assert_eq!(sdk_in_scope("export{a as App()};"), None);
    }
}
