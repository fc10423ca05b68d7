//! Signals between hosts: what one connection sends, another listening one receives; the
//! payload bound; a quiet channel times out empty.

use std::time::{Duration, Instant};

use ahp_store_postgres::signal::MAX_SIGNAL_BYTES;
use ahp_store_postgres::{Listener, Signaller};
use ahp_store_sql::SqlError;

use super::database;

#[test]
fn a_listener_receives_what_a_signaller_sends_and_times_out_when_quiet() {
    let Some((_, url, _db)) = database() else { return };
    let mut listener = Listener::connect(&url).unwrap();
    let mut signaller = Signaller::connect(&url).unwrap();
    let started = Instant::now();
    assert_eq!(listener.wait(Duration::from_millis(200)).unwrap(), Vec::<String>::new());
    assert!(started.elapsed() >= Duration::from_millis(200));
    signaller.send("wake agt_1").unwrap();
    signaller.send("wake agt_2").unwrap();
    let mut got = listener.wait(Duration::from_secs(5)).unwrap();
    if got.len() < 2 {
        got.extend(listener.wait(Duration::from_secs(5)).unwrap());
    }
    assert_eq!(got, ["wake agt_1", "wake agt_2"]);
    assert!(signaller.send(&"x".repeat(MAX_SIGNAL_BYTES)).is_ok());
    assert!(matches!(
        signaller.send(&"x".repeat(MAX_SIGNAL_BYTES + 1)),
        Err(SqlError::Backend(_))
    ));
}
