//! Time, injectable.
//!
//! Every deadline in the store — token expiry, transfer TTL, the insolvency grace period,
//! endpoint leases — is computed from a [`Clock`], so tests move time forward with a
//! [`ManualClock`] instead of sleeping. Time is integer microseconds since the Unix epoch
//! ([`Timestamp`]), the unit stored in every `*_at` column.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time: microseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The timestamp `micros` microseconds after the Unix epoch.
    pub const fn from_micros(micros: i64) -> Self {
        Self(micros)
    }

    /// Microseconds since the Unix epoch.
    pub const fn as_micros(self) -> i64 {
        self.0
    }

    /// This instant plus `d`, saturating at the end of representable time.
    pub fn saturating_add(self, d: Duration) -> Self {
        Self(self.0.saturating_add(duration_micros(d)))
    }

    /// This instant minus `d`, saturating at the start of representable time.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Self(self.0.saturating_sub(duration_micros(d)))
    }
}

impl fmt::Display for Timestamp {
    /// Formats as RFC 3339 UTC with microseconds, e.g. `2026-11-30T11:45:39.000123Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.div_euclid(1_000_000);
        let micros = self.0.rem_euclid(1_000_000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )
    }
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn duration_micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A source of the current time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Timestamp(duration_micros(since))
    }
}

/// The operating system's wall clock corrected by an offset towards another clock's — the
/// database's, on a backend shared by several hosts, so their leases are judged by one clock
/// ([`Store::sync_database_clock`](crate::Store::sync_database_clock) measures the offset).
#[derive(Debug, Default)]
pub struct OffsetClock {
    offset_micros: AtomicI64,
}

impl OffsetClock {
    /// A clock with no offset yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current offset from the system clock, in microseconds.
    pub fn offset_micros(&self) -> i64 {
        self.offset_micros.load(Ordering::Relaxed)
    }

    /// Sets the offset from the system clock.
    pub fn set_offset_micros(&self, offset: i64) {
        self.offset_micros.store(offset, Ordering::Relaxed);
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> Timestamp {
        let system = SystemClock.now().0;
        Timestamp(system.saturating_add(self.offset_micros()))
    }
}

/// A clock that only moves when told to; clones share the same time.
///
/// ```
/// use ahp_store::{Clock, ManualClock, Timestamp};
/// use std::time::Duration;
/// let clock = ManualClock::new(Timestamp::from_micros(0));
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(clock.now().as_micros(), 1_000_000);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(start.0)))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(duration_micros(d), Ordering::SeqCst);
    }

    /// Sets the clock to `t`.
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_rfc3339() {
        assert_eq!(Timestamp::from_micros(0).to_string(), "1970-01-01T00:00:00.000000Z");
        // 2026-11-30T11:45:39.000123Z
        assert_eq!(
            Timestamp::from_micros(1_796_039_139_000_123).to_string(),
            "2026-11-30T11:45:39.000123Z"
        );
    }
}
