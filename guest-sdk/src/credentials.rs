//! Resolving credential references through the host's vault.
//!
//! A snapshot never holds a secret: each MCP server names a *credential reference*, and the
//! agent trades it for the value here. The host allows only the references its own snapshot
//! lists and audits every attempt (never the value).
//!
//! ```no_run
//! use ahp_guest::credentials::{self, Error};
//!
//! match credentials::resolve("inventory-api") {
//!     Ok(cred) => { let _token = cred.as_str(); }
//!     Err(Error::NotAllowed(why)) => eprintln!("not ours to use: {why}"),
//!     Err(e) => eprintln!("no credential: {e}"),
//! }
//! ```

use crate::wit::ahp::agent::credentials as raw;

/// A resolved secret. Its `Debug` output hides the value.
#[derive(Clone)]
pub struct Credential {
    cred_ref: String,
    value: Vec<u8>,
}

impl Credential {
    /// The reference this credential was resolved from.
    pub fn cred_ref(&self) -> &str {
        &self.cred_ref
    }

    /// The secret's bytes.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The secret as text, trimmed of surrounding whitespace (a vault file usually ends with a
    /// newline); `None` if it is not UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.value).ok().map(str::trim)
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("cred_ref", &self.cred_ref)
            .field("value", &"<redacted>")
            .finish()
    }
}

/// Why a resolution was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The reference is not listed in this agent's snapshot, or is malformed; says which rule.
    NotAllowed(String),
    /// The reference is allowed but the vault has no such credential.
    NotFound,
    /// The vault could not be read.
    Unavailable(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAllowed(why) => write!(f, "credential reference not allowed: {why}"),
            Self::NotFound => f.write_str("no such credential in the vault"),
            Self::Unavailable(why) => write!(f, "the vault is unavailable: {why}"),
        }
    }
}

impl std::error::Error for Error {}

/// Resolves `cred_ref` to its value.
///
/// # Errors
///
/// [`Error::NotAllowed`] for a reference this agent's snapshot does not list (or a path such
/// as `../x`), [`Error::NotFound`], [`Error::Unavailable`].
pub fn resolve(cred_ref: &str) -> Result<Credential, Error> {
    match raw::resolve(cred_ref) {
        Ok(c) => Ok(Credential {
            cred_ref: c.cred_ref,
            value: c.value,
        }),
        Err(raw::Error::NotAllowed(why)) => Err(Error::NotAllowed(why)),
        Err(raw::Error::NotFound) => Err(Error::NotFound),
        Err(raw::Error::Unavailable(why)) => Err(Error::Unavailable(why)),
    }
}
