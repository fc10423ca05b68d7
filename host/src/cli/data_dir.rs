//! The data directory: where the database, the token key, the vault, the operator's policy and
//! the component cache live.

use std::path::{Path, PathBuf};

use ahp_host::host::{Host, HostBuilder};
use ahp_host::policy::Policy;
use ahp_store::{Store, TokenKey};
use anyhow::Context;

/// Environment variable naming the data directory when `--data-dir` is not given.
pub(crate) const DATA_DIR_ENV: &str = "AHP_DATA_DIR";
/// The vault directory inside the data directory: credential reference `x` is the file `vault/x`.
pub(crate) const VAULT_DIR: &str = "vault";
/// The database file inside the data directory.
pub(crate) const DATABASE_FILE: &str = "ahp.db";
/// The lock file `ahp serve` holds an exclusive lock on while it runs.
pub(crate) const SERVE_LOCK_FILE: &str = "serve.lock";

/// A resolved, existing data directory.
#[derive(Debug, Clone)]
pub(crate) struct DataDir(PathBuf);

impl DataDir {
    /// `--data-dir`, else `$AHP_DATA_DIR`, else the platform data directory; created if missing.
    pub(crate) fn resolve(flag: Option<PathBuf>) -> anyhow::Result<Self> {
        let path = match flag.or_else(|| std::env::var_os(DATA_DIR_ENV).map(PathBuf::from)) {
            Some(p) => p,
            None => dirs::data_dir()
                .context("no platform data directory; pass --data-dir or set AHP_DATA_DIR")?
                .join("ahp"),
        };
        Self::at(path)
    }

    /// Uses `path`, creating it (mode 0700 on Unix) if it does not exist.
    pub(crate) fn at(path: PathBuf) -> anyhow::Result<Self> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(&path)
            .with_context(|| format!("creating data directory {}", path.display()))?;
        Ok(Self(path))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// The transfer-token key: `$AHP_TRANSFER_TOKEN_SECRET`, else the key file (created if missing).
    pub(crate) fn token_key(&self) -> anyhow::Result<TokenKey> {
        Ok(TokenKey::from_env_or_file(&self.0)?)
    }

    /// Opens (and migrates) the database, with the token key configured.
    pub(crate) fn open_store(&self) -> anyhow::Result<Store> {
        let path = self.0.join(DATABASE_FILE);
        let store = Store::open(&path).with_context(|| format!("opening {}", path.display()))?;
        Ok(store.with_token_key(self.token_key()?))
    }

    /// Takes the data directory's serve guard: an exclusive lock on [`SERVE_LOCK_FILE`], held
    /// until the returned file is dropped (the OS releases it when the process dies, `kill -9`
    /// included).
    pub(crate) fn lock_for_serve(&self) -> anyhow::Result<std::fs::File> {
        let path = self.0.join(SERVE_LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
                "another ahp serve is already using {} (it holds {SERVE_LOCK_FILE})",
                self.0.display()
            ),
            Err(std::fs::TryLockError::Error(e)) => Err(e).with_context(|| format!("locking {}", path.display())),
        }
    }

    /// The operator's policy (`policy.json`; the empty policy if there is none).
    pub(crate) fn policy(&self) -> anyhow::Result<Policy> {
        Ok(Policy::load(&self.0)?)
    }

    /// The vault directory.
    pub(crate) fn vault_dir(&self) -> PathBuf {
        self.0.join(VAULT_DIR)
    }

    /// The host over this directory: the store, the sandboxes (engine, compile cache, the
    /// vault in [`VAULT_DIR`], the policy) and the agents' controller.
    pub(crate) fn open_host(&self) -> anyhow::Result<Host> {
        HostBuilder::new(self.open_store()?, &self.0)
            .policy(self.policy()?)
            .build()
            .context("starting the sandbox engine")
    }
}
