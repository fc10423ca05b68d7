//! Durable working memory: one blob per transfer, kept by the host across turns.
//!
//! [`save`] and [`load`] store any serde value as JSON; [`save_bytes`] and [`load_bytes`] take
//! raw bytes. The tier bounds the size.
//!
//! ```no_run
//! use ahp_guest::checkpoint::{self, Error};
//!
//! let mut seen: Vec<String> = checkpoint::load()?.unwrap_or_default();
//! seen.push("turn".into());
//! match checkpoint::save(&seen) {
//!     Ok(()) => {}
//!     Err(Error::TooLarge(max)) => eprintln!("working memory over {max} bytes; trimming"),
//!     Err(e) => return Err(e),
//! }
//! # Ok::<(), Error>(())
//! ```

use crate::wit::ahp::agent::checkpoint as raw;

/// Why a checkpoint operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The state is larger than the tier allows; the payload is that ceiling in bytes.
    TooLarge(u64),
    /// The host could not store or read it.
    Unavailable(String),
    /// The value could not be encoded, or the saved bytes are not the JSON of the asked type.
    Encoding(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge(max) => write!(f, "checkpoint larger than the tier's {max} bytes"),
            Self::Unavailable(why) => write!(f, "checkpoint storage unavailable: {why}"),
            Self::Encoding(why) => write!(f, "checkpoint encoding: {why}"),
        }
    }
}

impl std::error::Error for Error {}

fn map(e: raw::Error) -> Error {
    match e {
        raw::Error::TooLarge(max) => Error::TooLarge(max),
        raw::Error::Unavailable(why) => Error::Unavailable(why),
    }
}

/// Replaces the saved state with `state`.
///
/// # Errors
///
/// [`Error::TooLarge`] above the tier's ceiling; [`Error::Unavailable`].
pub fn save_bytes(state: &[u8]) -> Result<(), Error> {
    raw::save(state).map_err(map)
}

/// The last saved state, or `None` if nothing was saved yet.
///
/// # Errors
///
/// [`Error::Unavailable`].
pub fn load_bytes() -> Result<Option<Vec<u8>>, Error> {
    raw::load().map_err(map)
}

/// Saves `value` as JSON.
///
/// # Errors
///
/// As [`save_bytes`], and [`Error::Encoding`] if `value` cannot be serialized.
pub fn save<T: serde::Serialize + ?Sized>(value: &T) -> Result<(), Error> {
    let bytes = serde_json::to_vec(value).map_err(|e| Error::Encoding(e.to_string()))?;
    save_bytes(&bytes)
}

/// Loads the saved JSON as a `T`, or `None` if nothing was saved yet.
///
/// # Errors
///
/// As [`load_bytes`], and [`Error::Encoding`] if the saved bytes are not a `T`.
pub fn load<T: serde::de::DeserializeOwned>() -> Result<Option<T>, Error> {
    load_bytes()?
        .map(|b| serde_json::from_slice(&b).map_err(|e| Error::Encoding(e.to_string())))
        .transpose()
}
