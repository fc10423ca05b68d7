//! Dispatch opportunities between hosts: PostgreSQL `LISTEN`/`NOTIFY` on one channel.
//!
//! A host that commits a post for an agent another host carries, or hands an agent over in a
//! move, *signals* it ([`Signaller::send`]); every host *listens* ([`Listener::wait`]) and acts
//! on the signals meant for it. A signal is only an opportunity: it may be lost (a listener
//! reconnecting, a host restarting), so correctness never depends on it — every host also
//! polls the database on its tick. Each uses its own connection, apart from the store's.

use std::time::{Duration, Instant};

use ahp_store_sql::{SqlError, SqlResult};
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};

/// The channel every host listens on.
pub const CHANNEL: &str = "ahp_signal";

/// Longest signal payload, in bytes (PostgreSQL's own limit is 8000).
pub const MAX_SIGNAL_BYTES: usize = 256;

fn connect(url: &str) -> SqlResult<Client> {
    Client::connect(url, NoTls).map_err(|e| SqlError::Backend(format!("connecting to PostgreSQL: {e}")))
}

/// Sends signals on [`CHANNEL`].
pub struct Signaller {
    url: String,
    client: Client,
}

impl std::fmt::Debug for Signaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signaller").finish_non_exhaustive()
    }
}

impl Signaller {
    /// A signaller on its own connection to `url`.
    ///
    /// # Errors
    ///
    /// [`SqlError::Backend`] if the database cannot be reached.
    pub fn connect(url: &str) -> SqlResult<Self> {
        Ok(Self {
            url: url.to_owned(),
            client: connect(url)?,
        })
    }

    /// Sends `payload` to every listener (reconnecting once if the connection was lost).
    ///
    /// # Errors
    ///
    /// [`SqlError::Backend`] for a payload over [`MAX_SIGNAL_BYTES`] (nothing is sent) or if
    /// the database cannot be reached.
    pub fn send(&mut self, payload: &str) -> SqlResult<()> {
        if payload.len() > MAX_SIGNAL_BYTES {
            return Err(SqlError::Backend(format!(
                "a signal is at most {MAX_SIGNAL_BYTES} bytes"
            )));
        }
        if self.client.is_closed() {
            self.client = connect(&self.url)?;
        }
        self.client
            .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
            .map(|_| ())
            .map_err(|e| crate::error::classify(&e))
    }
}

/// Receives the signals sent on [`CHANNEL`].
pub struct Listener {
    url: String,
    client: Client,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").finish_non_exhaustive()
    }
}

fn listening(url: &str) -> SqlResult<Client> {
    let mut client = connect(url)?;
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .map_err(|e| crate::error::classify(&e))?;
    Ok(client)
}

impl Listener {
    /// A listener on its own connection to `url`.
    ///
    /// # Errors
    ///
    /// [`SqlError::Backend`] if the database cannot be reached.
    pub fn connect(url: &str) -> SqlResult<Self> {
        Ok(Self {
            url: url.to_owned(),
            client: listening(url)?,
        })
    }

    /// The signals that arrive within `timeout` (returns as soon as one has, with any others
    /// already queued; empty on timeout). A lost connection is reopened (signals sent
    /// meanwhile are lost: the hosts' polling covers them).
    ///
    /// # Errors
    ///
    /// [`SqlError::Backend`] when the database cannot be reached again.
    pub fn wait(&mut self, timeout: Duration) -> SqlResult<Vec<String>> {
        if self.client.is_closed() {
            self.client = listening(&self.url)?;
        }
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        let mut notifications = self.client.notifications();
        let first = notifications
            .timeout_iter(deadline.saturating_duration_since(Instant::now()))
            .next();
        match first {
            Ok(Some(n)) => out.push(n.payload().to_owned()),
            Ok(None) => return Ok(out),
            Err(e) => return Err(crate::error::classify(&e)),
        }
        let mut queued = notifications.iter();
        while let Ok(Some(n)) = queued.next() {
            out.push(n.payload().to_owned());
        }
        Ok(out)
    }
}
