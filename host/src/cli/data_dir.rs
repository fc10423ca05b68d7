//! The data directory: where the database, the token key, the vault, the operator's policy and
//! the component cache live — and, when several hosts share a PostgreSQL database
//! (`--database`), which database and which host this process is (`--host-id`).

use std::path::{Path, PathBuf};

use ahp_host::host::{Host, HostBuilder};
use ahp_host::policy::Policy;
use ahp_store::{DEFAULT_POOL_CONNECTIONS, Store, StorePool, TokenKey, WriteTurns};
use anyhow::Context;

/// Environment variable naming the data directory when `--data-dir` is not given.
pub(crate) const DATA_DIR_ENV: &str = "AHP_DATA_DIR";
/// The vault directory inside the data directory: credential reference `x` is the file `vault/x`.
pub(crate) const VAULT_DIR: &str = "vault";
/// The database file inside the data directory.
pub(crate) const DATABASE_FILE: &str = "ahp.db";
/// The lock file `ahp serve` holds an exclusive lock on while it runs.
pub(crate) const SERVE_LOCK_FILE: &str = "serve.lock";

/// Environment variable naming the shared database when `--database` is not given.
pub(crate) const DATABASE_ENV: &str = "AHP_DATABASE_URL";
/// Environment variable naming this host when `--host-id` is not given.
pub(crate) const HOST_ID_ENV: &str = "AHP_HOST_ID";

/// A resolved, existing data directory, and the database and host id it serves.
#[derive(Debug, Clone)]
pub(crate) struct DataDir(PathBuf, Database);

/// Which database a data directory's commands use.
#[derive(Debug, Clone, Default)]
pub(crate) struct Database {
    /// A PostgreSQL URL shared by several hosts; the embedded SQLite file when `None`.
    url: Option<String>,
    /// This host's id.
    host_id: Option<String>,
}

impl Database {
    /// `--database`, else `$AHP_DATABASE_URL` (a `postgres://` or `postgresql://` URL), and
    /// `--host-id`, else `$AHP_HOST_ID`, else this machine's host name.
    pub(crate) fn resolve(url: Option<String>, host_id: Option<String>) -> anyhow::Result<Self> {
        let url = url.or_else(|| std::env::var(DATABASE_ENV).ok().filter(|u| !u.is_empty()));
        if let Some(u) = &url {
            anyhow::ensure!(
                u.starts_with("postgres://") || u.starts_with("postgresql://"),
                "--database must be a postgres:// URL (without it, ahp uses the SQLite file in its data directory)"
            );
        }
        let host_id = host_id.or_else(|| std::env::var(HOST_ID_ENV).ok().filter(|h| !h.is_empty()));
        if let Some(h) = &host_id {
            ahp_store::hosts::validate_host_id(h).context("--host-id")?;
        }
        Ok(Self { url, host_id })
    }

    /// The host id: the one given, else this machine's host name (made a valid id), else
    /// `local`.
    pub(crate) fn host_id(&self) -> String {
        if let Some(h) = &self.host_id {
            return h.clone();
        }
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .unwrap_or_default();
        let id: String = name
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '-'
                }
            })
            .take(ahp_store::hosts::MAX_HOST_ID_CHARS)
            .collect();
        if ahp_store::hosts::validate_host_id(&id).is_ok() {
            id
        } else {
            ahp_store::hosts::DEFAULT_HOST_ID.to_owned()
        }
    }
}

impl DataDir {
    /// `--data-dir`, else `$AHP_DATA_DIR`, else the platform data directory; created if missing.
    pub(crate) fn resolve(flag: Option<PathBuf>, database: Database) -> anyhow::Result<Self> {
        let path = match flag.or_else(|| std::env::var_os(DATA_DIR_ENV).map(PathBuf::from)) {
            Some(p) => p,
            None => dirs::data_dir()
                .context("no platform data directory; pass --data-dir or set AHP_DATA_DIR")?
                .join("ahp"),
        };
        Ok(Self::at(path)?.on(database))
    }

    /// The same directory serving `database`.
    pub(crate) fn on(self, database: Database) -> Self {
        Self(self.0, database)
    }

    /// Whether several hosts may share its database (PostgreSQL).
    pub(crate) fn is_shared(&self) -> bool {
        self.1.url.is_some()
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
        Ok(Self(path, Database::default()))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// The transfer-token key: `$AHP_TRANSFER_TOKEN_SECRET`, else the key file (created if missing).
    pub(crate) fn token_key(&self) -> anyhow::Result<TokenKey> {
        Ok(TokenKey::from_env_or_file(&self.0)?)
    }

    /// Opens (and migrates) the database as one connection, with the token key configured: for
    /// a command that makes a few store calls and exits.
    pub(crate) fn open_store(&self) -> anyhow::Result<Store> {
        let store = match &self.1.url {
            Some(url) => Store::over(Box::new(self.open_session(url)?))?.with_database_clock()?,
            None => {
                let path = self.0.join(DATABASE_FILE);
                Store::open(&path).with_context(|| format!("opening {}", path.display()))?
            }
        };
        self.configure(store)
    }

    /// Opens (and migrates) the database as a host's pool of `connections`: on SQLite, that
    /// many connections committing through one group commit (concurrent writers share their
    /// fsyncs); on PostgreSQL, that many sessions following one measure of the database's
    /// clock and taking turns to write ([`WriteTurns`]).
    pub(crate) fn open_pool(&self, connections: usize) -> anyhow::Result<StorePool> {
        match &self.1.url {
            Some(url) => {
                let clock = std::sync::Arc::new(ahp_store::OffsetClock::new());
                let sessions = (0..connections)
                    .map(|_| Ok(Box::new(self.open_session(url)?) as Box<dyn ahp_store::sql::Connection>))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                // This host's sessions write one at a time: they would only conflict.
                let stores = WriteTurns::share(sessions)
                    .into_iter()
                    .map(|session| self.configure(Store::over(session)?.following_database_clock(clock.clone())?))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Ok(StorePool::of(stores)?)
            }
            None => {
                let path = self.0.join(DATABASE_FILE);
                let (host_id, key) = (self.1.host_id(), self.token_key()?);
                StorePool::open(&path, connections, |s| {
                    Ok(s.with_host_id(&host_id)?.with_token_key(key.clone()))
                })
                .with_context(|| format!("opening {}", path.display()))
            }
        }
    }

    fn open_session(&self, url: &str) -> anyhow::Result<ahp_store_postgres::PgConnection> {
        ahp_store_postgres::open(url).context("opening the PostgreSQL database")
    }

    /// The host id and the token key every store of this directory acts with.
    fn configure(&self, store: Store) -> anyhow::Result<Store> {
        Ok(store.with_host_id(&self.1.host_id())?.with_token_key(self.token_key()?))
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
        self.open_host_with(None, |b| b)
    }

    /// [`open_host`](Self::open_host) with the vault in `vault` instead of [`VAULT_DIR`] (a
    /// directory every host of a shared database can read), and the builder passed through
    /// `configure` (how `ahp serve` sizes its sandboxes).
    pub(crate) fn open_host_with(
        &self,
        vault: Option<&Path>,
        configure: impl FnOnce(HostBuilder) -> HostBuilder,
    ) -> anyhow::Result<Host> {
        let pool = self.open_pool(DEFAULT_POOL_CONNECTIONS)?;
        let mut builder = configure(HostBuilder::new(pool, &self.0).policy(self.policy()?));
        if let Some(dir) = vault {
            let v =
                ahp_host::vault::DirVault::open(dir).with_context(|| format!("opening the vault {}", dir.display()))?;
            builder = builder.vault(std::sync::Arc::new(v));
        }
        builder.build().context("starting the sandbox engine")
    }

    /// The shared database's URL, if it is one.
    pub(crate) fn database_url(&self) -> Option<&str> {
        self.1.url.as_deref()
    }
}
