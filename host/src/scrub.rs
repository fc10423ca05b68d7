//! Scrubbing an injected credential from what the host hands a guest: a model provider's error
//! body, an MCP server's tool list, results and errors. A server that echoes the credential it
//! was sent — in an error quoting the request, say — must not hand it to the guest the host
//! keeps it from.
//!
//! A secret is looked for in every form a server is likely to echo it in: as it is, JSON-escaped
//! (inside a quoted string of a JSON body), and base64-encoded with either alphabet (a header
//! echoed as a blob, a Basic credential) at each of the three alignments it can take inside a
//! longer encoded text — for the unaligned ones, the run of characters that depends on the
//! secret's bytes alone. Each occurrence becomes [`REDACTED`]. Secrets shorter than
//! [`MIN_SECRET_BYTES`] are scrubbed as they are only: their encoded fragments would be too
//! short to tell from ordinary text.

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// What each occurrence of a secret becomes.
pub const REDACTED: &str = "[credential]";

/// Shortest secret whose encoded forms are scrubbed too.
pub const MIN_SECRET_BYTES: usize = 8;

/// The forms of one or more secrets to scrub from text.
#[derive(Clone, Default)]
pub struct Scrub {
    /// Every form, longest first (so a longer form is replaced before a fragment of it).
    forms: Vec<String>,
}

impl std::fmt::Debug for Scrub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scrub").field("forms", &self.forms.len()).finish()
    }
}

impl Scrub {
    /// The forms of each of `secrets` (surrounding ASCII whitespace ignored; empty ones
    /// skipped).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut forms = Vec::new();
        for secret in secrets {
            let secret = secret.trim_ascii();
            if secret.is_empty() {
                continue;
            }
            let text = String::from_utf8_lossy(secret).into_owned();
            if secret.len() >= MIN_SECRET_BYTES {
                let escaped = serde_json::to_string(&text).unwrap_or_default();
                forms.push(escaped[1..escaped.len() - 1].to_owned());
                for align in 0..3 {
                    forms.extend(encoded(secret, align));
                }
            }
            forms.push(text);
        }
        forms.retain(|f| !f.is_empty());
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms.dedup();
        Self { forms }
    }

    /// Whether there is nothing to scrub.
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// `text` with every form of every secret replaced by [`REDACTED`].
    pub fn text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for form in &self.forms {
            if out.contains(form.as_str()) {
                out = Cow::Owned(out.replace(form.as_str(), REDACTED));
            }
        }
        out
    }

    /// [`text`](Self::text), in place.
    pub fn string(&self, text: &mut String) {
        if let Cow::Owned(scrubbed) = self.text(text) {
            *text = scrubbed;
        }
    }
}

/// The base64 text (both alphabets) that `secret`, preceded by `align` other bytes, always
/// encodes to, whatever those bytes and the ones after it: the groups of three bytes that are
/// all the secret's.
fn encoded(secret: &[u8], align: usize) -> Vec<String> {
    let mut padded = vec![0_u8; align];
    padded.extend_from_slice(secret);
    [STANDARD_NO_PAD, URL_SAFE_NO_PAD]
        .iter()
        .filter_map(|engine| {
            let text = engine.encode(&padded);
            // The first group holds the `align` foreign bytes when there are any; a last group
            // of fewer than three bytes depends on whatever follows the secret.
            let start = if align > 0 { 4 } else { 0 };
            let whole_groups = padded.len() / 3 * 4;
            let end = whole_groups.min(text.len());
            (end > start && end - start >= MIN_SECRET_BYTES).then(|| text[start..end].to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "sk-live-0123456789abcdef\"quoted\\";

    fn scrub() -> Scrub {
        Scrub::new([SECRET.as_bytes()])
    }

    #[test]
    fn every_form_of_the_secret_is_redacted() {
        let s = scrub();
        let json = serde_json::to_string(&serde_json::json!({ "echo": SECRET })).unwrap();
        assert!(!s.text(&json).contains("0123456789"), "{json}");
        for prefix in ["", "a", "ab", "Bearer ", "user:"] {
            let blob = format!("{prefix}{SECRET} and after");
            for engine in [
                base64::engine::general_purpose::STANDARD,
                base64::engine::general_purpose::URL_SAFE,
            ] {
                let encoded = engine.encode(&blob);
                let scrubbed = s.text(&encoded);
                assert!(scrubbed.contains(REDACTED), "{prefix:?}: {encoded}");
                // What is left cannot be decoded back to the secret.
                let left = scrubbed.replace(REDACTED, "");
                let decoded = engine.decode(left.trim_end_matches('=')).unwrap_or_default();
                assert!(!String::from_utf8_lossy(&decoded).contains("0123456789"), "{prefix:?}");
            }
        }
        assert_eq!(s.text(&format!("key={SECRET}!")), format!("key={REDACTED}!"));
    }

    #[test]
    fn text_without_the_secret_is_left_as_it_is() {
        let s = scrub();
        let text = "an ordinary answer: 42 units of A-1";
        assert!(matches!(s.text(text), Cow::Borrowed(_)));
        assert!(Scrub::new([b"  ".as_slice()]).is_empty());
    }

    #[test]
    fn a_short_secret_is_scrubbed_as_it_is_only() {
        let s = Scrub::new([b"abc1234".as_slice()]);
        assert_eq!(s.text("x abc1234 y"), format!("x {REDACTED} y"));
        assert_eq!(s.forms.len(), 1);
    }
}
