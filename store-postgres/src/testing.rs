//! A fresh PostgreSQL database per test, for the store's PostgreSQL suites.
//!
//! `AHP_TEST_PG` names a server (a libpq URL whose user may `CREATE DATABASE`; `.ci/postgres`
//! starts one and prints it). Without it the suites are skipped, and say so once.

use std::io::Write;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use postgres::{Client, NoTls};

/// The environment variable naming the test server.
pub const ENV: &str = "AHP_TEST_PG";

/// A database created for one test; dropped (with its connections) when this is dropped.
#[derive(Debug)]
pub struct DatabaseGuard {
    server: String,
    name: String,
}

impl Drop for DatabaseGuard {
    fn drop(&mut self) {
        // Best effort: a test that leaked a connection must not fail in its destructor.
        if let Ok(mut admin) = Client::connect(&self.server, NoTls) {
            let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name));
        }
    }
}

impl DatabaseGuard {
    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The test server's URL, or `None` (after printing, once per process, that the PostgreSQL
/// suites are skipped) when `AHP_TEST_PG` is unset or empty.
pub fn server() -> Option<String> {
    static SKIPPED: Once = Once::new();
    match std::env::var(ENV) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            // Straight to the process's stderr, past the test harness's output capture, so a
            // passing run still says that it skipped something.
            SKIPPED.call_once(|| {
                let _ = writeln!(std::io::stderr(), "skipped: {ENV} not set: PostgreSQL suites skipped (start a server with: eval \"$(bash .ci/postgres start)\")");
            });
            None
        }
    }
}

/// A new, empty database on the test server (`CREATE DATABASE … TEMPLATE template0`, about
/// 0.1 s), collated `C` so text sorts by code point as SQLite's `BINARY` does (the order of
/// every `ORDER BY id` and `id > ?N` page), as a URL to connect to and the guard that drops
/// it; `None` when `AHP_TEST_PG` is unset.
///
/// # Panics
///
/// When `AHP_TEST_PG` is set but the server cannot be reached or refuses to create the
/// database: a configured suite must fail, never pass by skipping.
pub fn fresh_database() -> Option<(String, DatabaseGuard)> {
    Some(fresh_database_on(server()?))
}

fn fresh_database_on(server: String) -> (String, DatabaseGuard) {
    let mut admin = Client::connect(&server, NoTls).unwrap_or_else(|e| panic!("{ENV}={server}: cannot connect: {e}"));
    let name = unique_name();
    admin
        .batch_execute(&format!(
            "CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
        ))
        .unwrap_or_else(|e| panic!("{ENV}={server}: CREATE DATABASE {name}: {e}"));
    let url = with_database(&server, &name);
    (url, DatabaseGuard { server, name })
}

/// `ahp_test_<pid>_<counter>_<nanos>`: unique across the threads of one test binary and
/// across binaries running at once.
fn unique_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "ahp_test_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `server` with its database replaced by `name`: the URL's path (`postgres://…/db?opts`),
/// or a `dbname=` appended to a key-value connection string (a later key wins in libpq).
fn with_database(server: &str, name: &str) -> String {
    if let Some(rest) = server
        .strip_prefix("postgres://")
        .or_else(|| server.strip_prefix("postgresql://"))
    {
        let scheme = &server[..server.len() - rest.len()];
        let (before_query, query) = match rest.find('?') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let authority = before_query.split('/').next().unwrap_or(before_query);
        format!("{scheme}{authority}/{name}{query}")
    } else {
        format!("{server} dbname={name}")
    }
}

#[cfg(test)]
mod tests {
    use super::{fresh_database_on, with_database};

    #[test]
    #[should_panic(expected = "cannot connect")]
    fn a_configured_but_unreachable_server_fails_loudly() {
        // Port 1 on loopback: nothing listens there.
        fresh_database_on("postgres://nobody@127.0.0.1:1/postgres".to_owned());
    }

    #[test]
    fn database_replaced_in_urls_and_key_value_strings() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("postgresql://u@h:1?sslmode=disable", "x"),
            "postgresql://u@h:1/x?sslmode=disable"
        );
        assert_eq!(
            with_database("host=/tmp dbname=postgres", "x"),
            "host=/tmp dbname=postgres dbname=x"
        );
    }
}
