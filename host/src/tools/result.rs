//! What the host's MCP client hands the guest: a tool as `list` returns it, a call's result
//! (converted from MCP's content blocks within [`MAX_RESULT_BYTES`]) and why a call was refused
//! or failed — the WIT `tools` types, before their conversion at the interface.

use base64::Engine as _;
use rmcp::model::{ContentBlock, ResourceContents};

use super::MAX_RESULT_BYTES;
use crate::scrub::Scrub;

/// Why a `tools` call was refused or failed (the WIT `tools.error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No reachable server has a tool of that name.
    #[error("no reachable server has a tool named {0:?}")]
    UnknownTool(String),
    /// The arguments are not a JSON object, or too large.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The server answered with more than a bound.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The server answered with a protocol error.
    #[error("server error: {0}")]
    ServerError(String),
    /// The server could not be reached or did not answer in time.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A per-turn bound, the egress ceiling or the budget refused the call.
    #[error("refused: {0}")]
    Refused(String),
    /// The transfer's budget is spent.
    #[error("insolvent")]
    Insolvent,
}

impl Error {
    /// The stable kind of this error, as audited.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnknownTool(_) => "unknown_tool",
            Self::InvalidArguments(_) => "invalid_arguments",
            Self::TooLarge(_) => "too_large",
            Self::ServerError(_) => "server_error",
            Self::Unavailable(_) => "unavailable",
            Self::Refused(_) => "refused",
            Self::Insolvent => "insolvent",
        }
    }
}

/// One tool, as `list` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// Its name for `call` (see [`naming`](super::naming)).
    pub name: String,
    /// What it does (at most [`MAX_DESCRIPTION_BYTES`](super::MAX_DESCRIPTION_BYTES)).
    pub description: String,
    /// Its input schema, JSON text (at most [`MAX_SCHEMA_BYTES`](super::MAX_SCHEMA_BYTES)).
    pub input_schema_json: String,
    /// The snapshot's URL of its server.
    pub server: String,
}

/// One item of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Text.
    Text(String),
    /// An image: MIME type and bytes.
    Image(String, Vec<u8>),
    /// Audio: MIME type and bytes.
    Audio(String, Vec<u8>),
    /// An embedded resource.
    Resource {
        /// Its URI.
        uri: String,
        /// Its MIME type.
        mime_type: Option<String>,
        /// Its text.
        text: Option<String>,
        /// Its bytes.
        blob: Option<Vec<u8>>,
    },
    /// A link to a resource.
    ResourceLink(String),
}

impl Content {
    pub(super) fn len(&self) -> usize {
        match self {
            Self::Text(t) | Self::ResourceLink(t) => t.len(),
            Self::Image(m, d) | Self::Audio(m, d) => m.len() + d.len(),
            Self::Resource {
                uri,
                mime_type,
                text,
                blob,
            } => {
                uri.len()
                    + mime_type.as_ref().map_or(0, String::len)
                    + text.as_ref().map_or(0, String::len)
                    + blob.as_ref().map_or(0, Vec::len)
            }
        }
    }
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallResult {
    /// The content, in order.
    pub content: Vec<Content>,
    /// Structured content, JSON text.
    pub structured_json: Option<String>,
    /// Whether the tool reports a failure.
    pub is_error: bool,
    /// What the call was charged, micro-USD.
    pub charged_micro_usd: u64,
}

impl CallResult {
    /// Every text of it scrubbed of `scrub`'s secret, in place (media bytes are left as sent).
    pub(super) fn scrub(&mut self, scrub: &Scrub) {
        if scrub.is_empty() {
            return;
        }
        for item in &mut self.content {
            match item {
                Content::Text(t) | Content::ResourceLink(t) => scrub.string(t),
                Content::Image(mime, _) | Content::Audio(mime, _) => scrub.string(mime),
                Content::Resource {
                    uri, mime_type, text, ..
                } => {
                    scrub.string(uri);
                    mime_type
                        .iter_mut()
                        .chain(text.iter_mut())
                        .for_each(|s| scrub.string(s));
                }
            }
        }
        if let Some(json) = &mut self.structured_json {
            scrub.string(json);
        }
    }
}

impl Error {
    /// This error with its message scrubbed of `scrub`'s secret.
    pub(super) fn scrubbed(self, scrub: &Scrub) -> Self {
        let s = |m: String| scrub.text(&m).into_owned();
        match self {
            Self::UnknownTool(m) => Self::UnknownTool(s(m)),
            Self::InvalidArguments(m) => Self::InvalidArguments(s(m)),
            Self::TooLarge(m) => Self::TooLarge(s(m)),
            Self::ServerError(m) => Self::ServerError(s(m)),
            Self::Unavailable(m) => Self::Unavailable(s(m)),
            Self::Refused(m) => Self::Refused(s(m)),
            other => other,
        }
    }
}

/// A result in the interface's terms, within [`MAX_RESULT_BYTES`].
pub(super) fn convert(r: rmcp::model::CallToolResult) -> Result<CallResult, Error> {
    let b64 = |data: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|_| Error::ServerError("the server sent media that is not base64".into()))
    };
    let mut content = Vec::with_capacity(r.content.len());
    let mut total = 0usize;
    for block in r.content {
        let item = match block {
            ContentBlock::Text(t) => Content::Text(t.text),
            ContentBlock::Image(i) => Content::Image(i.mime_type, b64(&i.data)?),
            ContentBlock::Audio(a) => Content::Audio(a.mime_type, b64(&a.data)?),
            ContentBlock::Resource(e) => match e.resource {
                ResourceContents::TextResourceContents {
                    uri, mime_type, text, ..
                } => Content::Resource {
                    uri,
                    mime_type,
                    text: Some(text),
                    blob: None,
                },
                ResourceContents::BlobResourceContents {
                    uri, mime_type, blob, ..
                } => Content::Resource {
                    uri,
                    mime_type,
                    text: None,
                    blob: Some(b64(&blob)?),
                },
                _ => {
                    return Err(Error::ServerError(
                        "the server sent a resource this host does not know".into(),
                    ));
                }
            },
            ContentBlock::ResourceLink(l) => Content::ResourceLink(l.uri),
            _ => {
                return Err(Error::ServerError(
                    "the server sent a content type this host does not know".into(),
                ));
            }
        };
        total += item.len();
        content.push(item);
    }
    let structured_json = r.structured_content.map(|v| v.to_string());
    total += structured_json.as_ref().map_or(0, String::len);
    if total > MAX_RESULT_BYTES {
        return Err(Error::TooLarge(format!(
            "the result is {total} bytes; at most {MAX_RESULT_BYTES}"
        )));
    }
    Ok(CallResult {
        content,
        structured_json,
        is_error: r.is_error.unwrap_or(false),
        charged_micro_usd: 0,
    })
}

/// `s` cut to at most `max` bytes at a character boundary.
pub(super) fn bounded(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}
