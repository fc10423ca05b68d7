//! The vault: where credential references resolve to secrets.
//!
//! A snapshot carries credential *references*; the destination host trades a reference for its
//! value here, and only for a guest whose own snapshot lists it (that check is the
//! `credentials` interface's; this module only reads). [`Vault`] is a small trait so other
//! backends (an OS keychain, a secrets manager) can follow; [`DirVault`] is the built-in one: a
//! directory (`<data-dir>/vault`) opened with cap-std, one file per reference. cap-std resolves
//! every path beneath that directory handle, so a reference can never name a file outside it —
//! not with `..`, an absolute path or a symlink — even before [`validate_cred_ref`] refuses
//! such names outright.

use std::io::Read;
use std::path::Path;

use ahp_store::snapshot::validate_cred_ref;
use cap_std::ambient_authority;
use cap_std::fs::Dir;

/// Largest secret the vault returns, in bytes: API keys and tokens are far smaller; a larger
/// file is a misplaced payload, not a credential.
pub const MAX_CREDENTIAL_BYTES: u64 = 64 * 1024;

/// Why the vault could not resolve a reference.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The reference is malformed (a path, `..`, too long, …): says which rule it broke.
    #[error("invalid credential reference: {0}")]
    InvalidRef(String),
    /// The vault holds no credential of that name.
    #[error("no credential {0:?} in the vault")]
    NotFound(String),
    /// The credential is larger than [`MAX_CREDENTIAL_BYTES`].
    #[error("credential {0:?} is larger than {MAX_CREDENTIAL_BYTES} bytes")]
    TooLarge(String),
    /// The backend failed.
    #[error("vault I/O on {cred_ref:?}: {source}")]
    Io {
        /// The reference being resolved.
        cred_ref: String,
        /// What failed.
        source: std::io::Error,
    },
}

/// A source of secrets by reference.
pub trait Vault: Send + Sync + std::fmt::Debug {
    /// The secret `cred_ref` names.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRef`], [`Error::NotFound`], [`Error::TooLarge`] or [`Error::Io`].
    fn resolve(&self, cred_ref: &str) -> Result<Vec<u8>, Error>;
}

/// A vault backed by a directory: the reference `inventory-api` is the file `inventory-api`.
#[derive(Debug)]
pub struct DirVault {
    dir: Dir,
}

impl DirVault {
    /// Opens (creating if needed) the vault directory at `path`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the directory cannot be created or opened.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let io = |source| Error::Io {
            cred_ref: String::new(),
            source,
        };
        std::fs::create_dir_all(path).map_err(io)?;
        let dir = Dir::open_ambient_dir(path, ambient_authority()).map_err(io)?;
        Ok(Self { dir })
    }
}

impl Vault for DirVault {
    fn resolve(&self, cred_ref: &str) -> Result<Vec<u8>, Error> {
        validate_cred_ref(cred_ref).map_err(Error::InvalidRef)?;
        let file = match self.dir.open(cred_ref) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NotFound(cred_ref.to_owned()));
            }
            Err(source) => {
                return Err(Error::Io {
                    cred_ref: cred_ref.to_owned(),
                    source,
                });
            }
        };
        let mut value = Vec::new();
        file.take(MAX_CREDENTIAL_BYTES + 1)
            .read_to_end(&mut value)
            .map_err(|source| Error::Io {
                cred_ref: cred_ref.to_owned(),
                source,
            })?;
        if value.len() as u64 > MAX_CREDENTIAL_BYTES {
            return Err(Error::TooLarge(cred_ref.to_owned()));
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_files_and_refuses_escapes_and_oversize() {
        let root = tempfile::tempdir().unwrap();
        let vault_dir = root.path().join("vault");
        let vault = DirVault::open(&vault_dir).unwrap();
        std::fs::write(vault_dir.join("inventory-api"), b"sk-test\n").unwrap();
        std::fs::write(root.path().join("outside"), b"secret").unwrap();
        std::fs::write(vault_dir.join("huge"), vec![0; MAX_CREDENTIAL_BYTES as usize + 1]).unwrap();
        std::fs::write(vault_dir.join("max"), vec![0; MAX_CREDENTIAL_BYTES as usize]).unwrap();
        assert_eq!(vault.resolve("inventory-api").unwrap(), b"sk-test\n");
        assert!(matches!(vault.resolve("../outside"), Err(Error::InvalidRef(_))));
        assert!(matches!(vault.resolve("/etc/passwd"), Err(Error::InvalidRef(_))));
        assert!(matches!(vault.resolve("missing"), Err(Error::NotFound(_))));
        assert!(matches!(vault.resolve("huge"), Err(Error::TooLarge(_))));
        assert_eq!(vault.resolve("max").unwrap().len(), MAX_CREDENTIAL_BYTES as usize);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_out_of_the_vault_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let vault_dir = root.path().join("vault");
        let vault = DirVault::open(&vault_dir).unwrap();
        std::fs::write(root.path().join("outside"), b"secret").unwrap();
        std::os::unix::fs::symlink(root.path().join("outside"), vault_dir.join("sneaky")).unwrap();
        assert!(matches!(vault.resolve("sneaky"), Err(Error::Io { .. })));
    }
}
