//! The host library's error type for operations that span the store and the sandbox.

/// The host's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a host operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store refused or failed; nothing changed.
    #[error(transparent)]
    Store(#[from] ahp_store::Error),
    /// The sandbox refused or failed (a store refusal surfaces here too).
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::Error),
    /// The guest did not resume; `activation_failed` was recorded and the token is spent.
    #[error(
        "activation of {transfer} failed: {reason}; the transfer stays pushed and a retry needs a new activate token"
    )]
    ResumeFailed {
        /// The transfer.
        transfer: String,
        /// Why the guest did not resume.
        reason: String,
    },
}
