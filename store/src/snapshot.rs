//! The snapshot an orchestrator captures from a source session: validation, bounds and checksum.
//!
//! The input is the Handoff Protocol's `SnapshotStateInput` (field names in camelCase, as on the wire).
//! Every field is bounded; the limits below are what a large real session needs with room to
//! spare, while keeping one transfer row under ~10 MiB so a snapshot write stays one short
//! transaction.
//!
//! # Canonical form and checksum
//!
//! The checksum is the lowercase hex SHA-256 of the snapshot's *canonical JSON*:
//! - the whole input as one object with the keys `mcpConfig`, `messageHistory`, `sourceHost`,
//!   `systemPrompt`, `toolState` (array elements keep their order; `mcpConfig` entries have keys
//!   `credRef`, `server`; messages `content`, `role`);
//! - object keys sorted by their UTF-8 bytes at every depth, including inside `toolState`;
//! - no whitespace outside strings; strings escaped as JSON requires and nothing more (`"`, `\`
//!   and control characters; `\n`, `\t` etc. in short form, others as `\u00XX`; non-ASCII
//!   written as UTF-8);
//! - numbers as `serde_json` writes them (integers plainly, floats in shortest round-trip form).
//!
//! The test vector in this file's tests pins the form.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Longest `sourceHost`, in bytes (a DNS name is at most 253).
pub const MAX_SOURCE_HOST_BYTES: usize = 255;
/// Longest `systemPrompt`, in bytes: 64 KiB is several times the longest production prompts.
pub const MAX_SYSTEM_PROMPT_BYTES: usize = 64 * 1024;
/// Most messages in `messageHistory`.
pub const MAX_MESSAGES: usize = 10_000;
/// Longest single message `content`, in bytes (a pasted document or a large tool result).
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// Most bytes of `role` + `content` over the whole history: 8 MiB, a long session's transcript.
pub const MAX_HISTORY_BYTES: usize = 8 * 1024 * 1024;
/// Longest `role`, in bytes.
pub const MAX_ROLE_BYTES: usize = 32;
/// Largest `toolState`, in bytes of its canonical JSON.
pub const MAX_TOOL_STATE_BYTES: usize = 1024 * 1024;
/// Deepest nesting of objects and arrays inside `toolState`.
pub const MAX_TOOL_STATE_DEPTH: usize = 32;
/// Most `mcpConfig` entries (MCP servers the session used).
pub const MAX_MCP_SERVERS: usize = 32;
/// Longest MCP `server` URL, in bytes.
pub const MAX_SERVER_URL_BYTES: usize = 2048;
/// Longest `credRef`, in bytes.
pub const MAX_CRED_REF_BYTES: usize = 128;

/// A snapshot of a running session, as `snapshot_state` receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotInput {
    /// Where the session ran until now (a host name or label; printable ASCII, no spaces).
    pub source_host: String,
    /// The session's system prompt.
    pub system_prompt: String,
    /// The conversation so far, oldest first.
    pub message_history: Vec<Message>,
    /// The agent's working memory: any JSON object.
    pub tool_state: Value,
    /// The MCP servers the session used, each with a reference to its credential.
    pub mcp_config: Vec<McpServer>,
}

/// One message of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Who spoke: lowercase ASCII letters, `_` or `-` (e.g. `user`, `assistant`, `tool`).
    pub role: String,
    /// What was said.
    pub content: String,
}

/// An MCP server the session used, and the *reference* to its credential (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpServer {
    /// The server's `http`/`https` URL, without user info or query (either could carry a secret).
    pub server: String,
    /// The vault entry holding its credential: see [`validate_cred_ref`].
    pub cred_ref: String,
}

impl SnapshotInput {
    /// Checks every field against its rule and bound.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the first offending field.
    pub fn validate(&self) -> Result<()> {
        let host = &self.source_host;
        if host.is_empty() || host.len() > MAX_SOURCE_HOST_BYTES {
            return Err(Error::invalid(
                "sourceHost",
                format!("must be 1 to {MAX_SOURCE_HOST_BYTES} bytes"),
            ));
        }
        if !host.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::invalid("sourceHost", "must be printable ASCII without spaces"));
        }
        if self.system_prompt.len() > MAX_SYSTEM_PROMPT_BYTES {
            return Err(Error::invalid(
                "systemPrompt",
                format!(
                    "is {} bytes; the limit is {MAX_SYSTEM_PROMPT_BYTES}",
                    self.system_prompt.len()
                ),
            ));
        }
        self.validate_history()?;
        self.validate_tool_state()?;
        self.validate_mcp_config()
    }

    fn validate_history(&self) -> Result<()> {
        let n = self.message_history.len();
        if n > MAX_MESSAGES {
            return Err(Error::invalid(
                "messageHistory",
                format!("has {n} messages; the limit is {MAX_MESSAGES}"),
            ));
        }
        let mut total = 0usize;
        for (i, m) in self.message_history.iter().enumerate() {
            let role_ok = !m.role.is_empty()
                && m.role.len() <= MAX_ROLE_BYTES
                && m.role.bytes().all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'-');
            if !role_ok {
                return Err(Error::invalid(
                    format!("messageHistory[{i}].role"),
                    format!("must be 1 to {MAX_ROLE_BYTES} lowercase ASCII letters, '_' or '-'"),
                ));
            }
            if m.content.len() > MAX_MESSAGE_BYTES {
                return Err(Error::invalid(
                    format!("messageHistory[{i}].content"),
                    format!("is {} bytes; the limit is {MAX_MESSAGE_BYTES}", m.content.len()),
                ));
            }
            total += m.role.len() + m.content.len();
        }
        if total > MAX_HISTORY_BYTES {
            return Err(Error::invalid(
                "messageHistory",
                format!("holds {total} bytes; the limit is {MAX_HISTORY_BYTES}"),
            ));
        }
        Ok(())
    }

    fn validate_tool_state(&self) -> Result<()> {
        if !self.tool_state.is_object() {
            return Err(Error::invalid("toolState", "must be a JSON object"));
        }
        if depth(&self.tool_state) > MAX_TOOL_STATE_DEPTH {
            return Err(Error::invalid(
                "toolState",
                format!("nests deeper than {MAX_TOOL_STATE_DEPTH} levels"),
            ));
        }
        let len = canonical_json(&self.tool_state).len();
        if len > MAX_TOOL_STATE_BYTES {
            return Err(Error::invalid(
                "toolState",
                format!("is {len} bytes; the limit is {MAX_TOOL_STATE_BYTES}"),
            ));
        }
        Ok(())
    }

    fn validate_mcp_config(&self) -> Result<()> {
        let n = self.mcp_config.len();
        if n > MAX_MCP_SERVERS {
            return Err(Error::invalid(
                "mcpConfig",
                format!("has {n} entries; the limit is {MAX_MCP_SERVERS}"),
            ));
        }
        for (i, entry) in self.mcp_config.iter().enumerate() {
            validate_server_url(&entry.server).map_err(|r| Error::invalid(format!("mcpConfig[{i}].server"), r))?;
            validate_cred_ref(&entry.cred_ref).map_err(|r| Error::invalid(format!("mcpConfig[{i}].credRef"), r))?;
            if self.mcp_config[..i].contains(entry) {
                return Err(Error::invalid(format!("mcpConfig[{i}]"), "duplicates an earlier entry"));
            }
        }
        Ok(())
    }

    /// The snapshot's canonical JSON (see the module docs).
    pub fn canonical_json(&self) -> String {
        let entry = |s: &McpServer| serde_json::json!({ "credRef": s.cred_ref, "server": s.server });
        let msg = |m: &Message| serde_json::json!({ "content": m.content, "role": m.role });
        let whole = serde_json::json!({
            "mcpConfig": self.mcp_config.iter().map(entry).collect::<Vec<_>>(),
            "messageHistory": self.message_history.iter().map(msg).collect::<Vec<_>>(),
            "sourceHost": self.source_host,
            "systemPrompt": self.system_prompt,
            "toolState": self.tool_state,
        });
        canonical_json(&whole)
    }

    /// SHA-256 of the canonical JSON, lowercase hex.
    pub fn checksum(&self) -> String {
        hex::encode(Sha256::digest(self.canonical_json().as_bytes()))
    }
}

/// Checks a credential reference: 1 to [`MAX_CRED_REF_BYTES`] bytes of ASCII letters, digits,
/// `.`, `_` and `-`, starting with a letter or digit, and never containing `..`. A ref names one
/// file in the vault directory, so it can contain no path separator.
///
/// # Errors
///
/// A sentence saying which rule the ref broke.
pub fn validate_cred_ref(cred_ref: &str) -> std::result::Result<(), String> {
    if cred_ref.is_empty() || cred_ref.len() > MAX_CRED_REF_BYTES {
        return Err(format!("must be 1 to {MAX_CRED_REF_BYTES} bytes"));
    }
    if !cred_ref.as_bytes()[0].is_ascii_alphanumeric() {
        return Err("must start with an ASCII letter or digit".into());
    }
    if !cred_ref
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("may contain only ASCII letters, digits, '.', '_' and '-'".into());
    }
    if cred_ref.contains("..") {
        return Err("may not contain '..'".into());
    }
    Ok(())
}

fn validate_server_url(server: &str) -> std::result::Result<(), String> {
    if server.is_empty() || server.len() > MAX_SERVER_URL_BYTES {
        return Err(format!("must be 1 to {MAX_SERVER_URL_BYTES} bytes"));
    }
    let url = url::Url::parse(server).map_err(|e| format!("is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be an http or https URL".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("must name a host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("may not carry user info; put credentials in the vault and use credRef".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("may not carry a query or fragment (it could hold a secret)".into());
    }
    Ok(())
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// `v` in canonical JSON: sorted keys at every depth, no whitespace (see the module docs).
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            // Sort explicitly: the map's own order depends on serde_json's `preserve_order` feature.
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, val)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                write_canonical(val, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A small valid snapshot, the one the test vector pins.
    pub(crate) fn example() -> SnapshotInput {
        SnapshotInput {
            source_host: "laptop-7".into(),
            system_prompt: "You forecast inventory.".into(),
            message_history: vec![
                Message {
                    role: "user".into(),
                    content: "Forecast SKU-1 for next week.".into(),
                },
                Message {
                    role: "assistant".into(),
                    content: "Fetching sales data\u{2026}\n".into(),
                },
            ],
            tool_state: json!({ "zeta": [3, 1.5, null], "alpha": { "b": true, "a": "é\"" } }),
            mcp_config: vec![McpServer {
                server: "https://inventory.example.com/mcp".into(),
                cred_ref: "inventory-api".into(),
            }],
        }
    }

    #[test]
    fn checksum_test_vector() {
        let s = example();
        let canonical = concat!(
            r#"{"mcpConfig":[{"credRef":"inventory-api","server":"https://inventory.example.com/mcp"}],"#,
            r#""messageHistory":[{"content":"Forecast SKU-1 for next week.","role":"user"},"#,
            "{\"content\":\"Fetching sales data\u{2026}\\n\",\"role\":\"assistant\"}],",
            r#""sourceHost":"laptop-7","systemPrompt":"You forecast inventory.","#,
            r#""toolState":{"alpha":{"a":"é\"","b":true},"zeta":[3,1.5,null]}}"#,
        );
        assert_eq!(s.canonical_json(), canonical);
        // Computed independently: printf '%s' "$canonical" | sha256sum
        assert_eq!(
            s.checksum(),
            "b1c1026b28e53354fa1fedbb09c8e4db56390e1ca71d6ef28b2b3cc3dbd7122a"
        );
    }

    #[test]
    fn the_example_is_valid() {
        example().validate().unwrap();
    }

    fn field_of(err: Error) -> String {
        match err {
            Error::InvalidInput { field, .. } => field,
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn bounds_at_the_limit_pass_and_one_past_fail() {
        let mut s = example();
        s.system_prompt = "p".repeat(MAX_SYSTEM_PROMPT_BYTES);
        s.validate().unwrap();
        s.system_prompt.push('p');
        assert_eq!(field_of(s.validate().unwrap_err()), "systemPrompt");

        let mut s = example();
        s.source_host = "h".repeat(MAX_SOURCE_HOST_BYTES);
        s.validate().unwrap();
        s.source_host.push('h');
        assert_eq!(field_of(s.validate().unwrap_err()), "sourceHost");

        let mut s = example();
        s.message_history = vec![
            Message {
                role: "user".into(),
                content: String::new()
            };
            MAX_MESSAGES
        ];
        s.validate().unwrap();
        s.message_history.push(Message {
            role: "user".into(),
            content: String::new(),
        });
        assert_eq!(field_of(s.validate().unwrap_err()), "messageHistory");

        let mut s = example();
        s.message_history[0].content = "c".repeat(MAX_MESSAGE_BYTES);
        s.validate().unwrap();
        s.message_history[0].content.push('c');
        assert_eq!(field_of(s.validate().unwrap_err()), "messageHistory[0].content");

        // Total history bytes: 32 full messages of 256 KiB is exactly 8 MiB of content, plus roles.
        let mut s = example();
        let big = Message {
            role: "u".into(),
            content: "c".repeat(MAX_MESSAGE_BYTES - 1),
        };
        s.message_history = vec![big; MAX_HISTORY_BYTES / MAX_MESSAGE_BYTES];
        s.validate().unwrap();
        s.message_history.push(Message {
            role: "u".into(),
            content: String::new(),
        });
        assert_eq!(field_of(s.validate().unwrap_err()), "messageHistory");

        let mut s = example();
        s.message_history[1].role = "r".repeat(MAX_ROLE_BYTES);
        s.validate().unwrap();
        s.message_history[1].role.push('r');
        assert_eq!(field_of(s.validate().unwrap_err()), "messageHistory[1].role");

        let mut s = example();
        let overhead = canonical_json(&json!({ "k": "" })).len();
        s.tool_state = json!({ "k": "x".repeat(MAX_TOOL_STATE_BYTES - overhead) });
        s.validate().unwrap();
        s.tool_state = json!({ "k": "x".repeat(MAX_TOOL_STATE_BYTES - overhead + 1) });
        assert_eq!(field_of(s.validate().unwrap_err()), "toolState");

        let mut s = example();
        let nest = |n: usize| (1..n).fold(json!({}), |inner, _| json!({ "n": inner }));
        s.tool_state = nest(MAX_TOOL_STATE_DEPTH);
        s.validate().unwrap();
        s.tool_state = nest(MAX_TOOL_STATE_DEPTH + 1);
        assert_eq!(field_of(s.validate().unwrap_err()), "toolState");

        let mut s = example();
        s.mcp_config = (0..MAX_MCP_SERVERS)
            .map(|i| McpServer {
                server: format!("https://s{i}.example/mcp"),
                cred_ref: format!("c{i}"),
            })
            .collect();
        s.validate().unwrap();
        s.mcp_config.push(McpServer {
            server: "https://x.example".into(),
            cred_ref: "x".into(),
        });
        assert_eq!(field_of(s.validate().unwrap_err()), "mcpConfig");

        let mut s = example();
        s.mcp_config[0].cred_ref = "c".repeat(MAX_CRED_REF_BYTES);
        s.validate().unwrap();
        s.mcp_config[0].cred_ref.push('c');
        assert_eq!(field_of(s.validate().unwrap_err()), "mcpConfig[0].credRef");

        let mut s = example();
        s.mcp_config[0].server = format!("https://e.example/{}", "p".repeat(MAX_SERVER_URL_BYTES - 18));
        s.validate().unwrap();
        s.mcp_config[0].server.push('p');
        assert_eq!(field_of(s.validate().unwrap_err()), "mcpConfig[0].server");
    }

    #[test]
    fn bad_shapes_are_refused_with_the_field_named() {
        type Mutation = fn(&mut SnapshotInput);
        let cases: Vec<(&str, Mutation)> = vec![
            ("sourceHost", |s| s.source_host = String::new()),
            ("sourceHost", |s| s.source_host = "my laptop".into()),
            ("messageHistory[0].role", |s| s.message_history[0].role = "User".into()),
            ("messageHistory[0].role", |s| s.message_history[0].role = String::new()),
            ("toolState", |s| s.tool_state = json!([1, 2])),
            ("toolState", |s| s.tool_state = json!("text")),
            ("mcpConfig[0].server", |s| {
                s.mcp_config[0].server = "ftp://x.example".into()
            }),
            ("mcpConfig[0].server", |s| s.mcp_config[0].server = "not a url".into()),
            ("mcpConfig[0].server", |s| {
                s.mcp_config[0].server = "https://u:pw@x.example".into()
            }),
            ("mcpConfig[0].server", |s| {
                s.mcp_config[0].server = "https://x.example/?key=s".into()
            }),
            ("mcpConfig[0].credRef", |s| {
                s.mcp_config[0].cred_ref = "../etc/passwd".into()
            }),
            ("mcpConfig[0].credRef", |s| s.mcp_config[0].cred_ref = "a..b".into()),
            ("mcpConfig[0].credRef", |s| s.mcp_config[0].cred_ref = "a/b".into()),
            ("mcpConfig[0].credRef", |s| s.mcp_config[0].cred_ref = ".hidden".into()),
            ("mcpConfig[0].credRef", |s| s.mcp_config[0].cred_ref = String::new()),
            ("mcpConfig[1]", |s| s.mcp_config.push(s.mcp_config[0].clone())),
        ];
        for (field, mutate) in cases {
            let mut s = example();
            mutate(&mut s);
            assert_eq!(field_of(s.validate().unwrap_err()), field);
        }
    }

    #[test]
    fn canonical_form_ignores_key_order_but_not_array_order() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":[1,2]}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "a": {"x": [1, 2], "y": 2}, "b": 1 }"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"a":{"x":[2,1],"y":2},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_ne!(canonical_json(&a), canonical_json(&c));
        assert_eq!(canonical_json(&json!("\u{1}\t")), r#""\u0001\t""#);
    }
}
