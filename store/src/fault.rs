//! Injected transient faults: a test seam for the store's callers, so that a test can make one
//! named step of the store's work fail exactly as a busy database makes it fail, and prove the
//! caller recovers (the host's continuation controller, which must never lose an agent to a
//! transient error).
//!
//! Not part of the store's API: compiled only with the crate's `testing` feature (its
//! dev-dependencies turn it on; a production build has no seam, no fault check and no SQL
//! function), and even then nothing happens unless a test calls
//! [`Store::inject_transient_fault`]. An armed step fails with
//! SQLite's own `SQLITE_BUSY` ("database is locked"), raised *inside* the real statement: a
//! write step through a `TEMP` trigger on the table it writes (the trigger calls the function
//! `ahp_fault`, which this seam registers on the connection), so the transaction rolls back
//! exactly as it would under a competing writer, and the error is one
//! [`Error::is_transient`](crate::Error::is_transient) (and
//! [`ConversationError::is_transient`](crate::conversation::ConversationError::is_transient))
//! recognise; the one read step ([`FaultStep::BudgetRead`]) from the read itself, and the lost
//! answer of a committed turn end ([`FaultStep::FinishTurnAnswer`]) after its commit. Temp triggers
//! live only on this connection and never reach the database file.
//!
//! Each armed step lets `pass` calls through, then fails the next `fail` calls, then passes
//! again; [`Store::faults_fired`] says how many times it failed, so a test can assert that its
//! fault was really met.

use std::sync::{Arc, PoisonError};

use rusqlite::functions::FunctionFlags;

use crate::db::Store;
use crate::error::Result;
use crate::fault_plan::FaultPlan;
pub use crate::fault_plan::FaultStep;

/// The error a busy database gives: `SQLITE_BUSY`, "database is locked".
fn busy() -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None)
}

impl Store {
    /// Test seam (see the [module docs](self)): lets the next `pass` calls of `step` through,
    /// then makes the `fail` calls after them fail with `SQLITE_BUSY`. Arming a step again
    /// replaces its counts (and keeps how often it fired).
    ///
    /// # Errors
    ///
    /// Only if SQLite refuses the function or the trigger.
    #[doc(hidden)]
    pub fn inject_transient_fault(&mut self, step: FaultStep, pass: u32, fail: u32) -> Result<()> {
        let plan = match &self.faults {
            Some(p) => p.clone(),
            None => {
                let plan = Arc::new(FaultPlan::default());
                let in_sql = plan.clone();
                self.sqlite_seam()?
                    .create_scalar_function("ahp_fault", 1, FunctionFlags::SQLITE_UTF8, move |cx| {
                        let name: String = cx.get(0)?;
                        match FaultStep::from_name(&name) {
                            Some(step) if in_sql.hit(step) => Err(busy()),
                            _ => Ok(0_i64),
                        }
                    })
                    .map_err(crate::sqlite::classify)?;
                self.faults = Some(plan.clone());
                plan
            }
        };
        {
            let mut arms = plan.0.lock().unwrap_or_else(PoisonError::into_inner);
            let arm = arms.entry(step).or_default();
            arm.pass = pass;
            arm.fail = fail;
        }
        if let Some(when) = step.trigger() {
            let name = step.name();
            self.sqlite_seam()?
                .execute_batch(&format!(
                    "CREATE TEMP TRIGGER IF NOT EXISTS ahp_fault_{name} {when}
                     BEGIN SELECT ahp_fault('{name}'); END;"
                ))
                .map_err(crate::sqlite::classify)?;
        }
        Ok(())
    }

    /// The SQLite connection the seam's function and triggers live on.
    fn sqlite_seam(&mut self) -> Result<&mut rusqlite::Connection> {
        self.sqlite()
            .ok_or_else(|| crate::Error::invalid("fault", "injected faults exist only on the SQLite backend"))
    }

    /// Test seam: how many times `step` has failed since it was first armed.
    #[doc(hidden)]
    pub fn faults_fired(&self, step: FaultStep) -> u32 {
        self.faults.as_ref().map_or(0, |p| {
            let arms = p.0.lock().unwrap_or_else(PoisonError::into_inner);
            arms.get(&step).map_or(0, |a| a.fired)
        })
    }

    /// Fails a step checked in Rust (a read, a lost answer) if a test armed it (a no-op check
    /// otherwise).
    pub(crate) fn fault_point(&self, step: FaultStep) -> ahp_store_sql::SqlResult<()> {
        match &self.faults {
            Some(p) if p.hit(step) => Err(crate::sqlite::classify(busy())),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_armed_step_fails_as_a_busy_database_then_passes() {
        if crate::testing::skip_on_postgres("the fault seam (SQL function and temp triggers) is SQLite's") {
            return;
        }
        let mut store = crate::testing::store().unwrap();
        store.inject_transient_fault(FaultStep::BudgetRead, 1, 2).unwrap();
        let read = |s: &mut Store| s.budget("tr_000000000000000000000001");
        assert!(read(&mut store).is_ok(), "the first call passes");
        for _ in 0..2 {
            let e = read(&mut store).unwrap_err();
            assert!(e.is_transient(), "{e}");
        }
        assert!(read(&mut store).is_ok(), "then it passes again");
        assert_eq!(store.faults_fired(FaultStep::BudgetRead), 2);
        assert_eq!(store.faults_fired(FaultStep::ClaimWake), 0);
    }

    #[test]
    fn a_write_step_fails_inside_its_statement_and_rolls_back() {
        if crate::testing::skip_on_postgres("the fault seam (SQL function and temp triggers) is SQLite's") {
            return;
        }
        let mut store = crate::testing::store().unwrap();
        // Busy on every attempt of the write path, so the caller sees it.
        store
            .inject_transient_fault(FaultStep::AttachEndpoint, 0, crate::MAX_WRITE_ATTEMPTS)
            .unwrap();
        let caller = crate::conversation::Caller::full("account:alice").unwrap();
        let card = crate::conversation::AgentCard {
            handle: "a".into(),
            display_name: "A".into(),
            description: String::new(),
            specialties: vec![],
        };
        let agent = store.create_agent(&caller, &card, "k").unwrap().value;
        let before = crate::testing::dump(&mut store);
        let lease = std::time::Duration::from_secs(60);
        let e = store.attach_endpoint(&caller, &agent.id, lease, "a1").unwrap_err();
        assert!(e.is_transient(), "{e}");
        let after = crate::testing::dump(&mut store);
        assert_eq!(before, after, "the failed step changed nothing");
        assert_eq!(store.faults_fired(FaultStep::AttachEndpoint), crate::MAX_WRITE_ATTEMPTS);
        assert!(store.attach_endpoint(&caller, &agent.id, lease, "a1").is_ok());
    }
}
