//! `activate`, the irreversible step, from token to live agent: the store begins the
//! activation (consuming the token), a fresh sandbox resumes the guest under its tier's
//! ceilings, and the store completes the activation only if the guest resumed — otherwise it
//! fails it with the reason, the transfer is back in `pushed` and a retry needs a fresh token.
//!
//! A resumed sandbox is kept live for the agent's later turns, and [`Host::activate`] then
//! binds the transfer to its agent (see `agents`); if that bind fails, the host drops the
//! sandbox and the reaper tick's repair binds the transfer later (nothing here is undone: the
//! transfer stays `active`). The sandbox itself ([`Sandboxes::run`]) knows nothing of this
//! lifecycle.
//!
//! The activation is two commits, `begin_activation` and its end: what the guest's `resume`
//! writes (its credential audit, checkpoint and spend, and the meter's settlements) is held
//! by the sandbox and recorded in the end's commit (see [`Journal`](crate::interfaces::Journal)),
//! and [`activate_and_bind`] binds the agent in that same commit.
//!

use std::time::Duration;

use ahp_store::conversation::CommunicationPrincipal;
use ahp_store::conversation::mcp_task::McpTask;
use ahp_store::{ActivationEnd, ActivationWrites, AgentBinding, Bind, Transfer};

use crate::Error;
use crate::agents;
#[cfg(doc)]
use crate::agents::Agents;
use crate::host::Host;
use crate::interfaces::journal;
use crate::sandbox::{self, Call, RunReport, Sandboxes, bounded};
use crate::shared_store::{SharedStore, StoreLock};

/// Begins the activation of `transfer` with `token` in `store`, resumes its guest in a fresh
/// sandbox of `sandboxes` and completes or fails the activation. A guest failure is not an `Err`: it is reported in
/// [`RunReport::outcome`], with the transfer back in `pushed`.
///
/// # Errors
///
/// [`sandbox::Error::Store`] if `begin_activation` refuses (token, state; nothing changed);
/// after it, setup failures ([`sandbox::Error::UnknownComponent`],
/// [`sandbox::Error::InvalidComponent`], …) end the activation as failed and are returned.
pub fn activate(
    store: &SharedStore,
    sandboxes: &Sandboxes,
    transfer: &str,
    token: &str,
) -> Result<RunReport, sandbox::Error> {
    run(store, sandboxes, transfer, token, None).map(|(report, _)| report)
}

/// [`activate`], and, when the guest resumed and the transfer is `active`, its agent bound in
/// the completing commit too ([`Store::end_activation`] with a [`Bind`]): a host-held endpoint
/// with a lease of `lease`, registered as this process's wake carrier if the guest takes
/// turns. Returns the binding, or `None` when there is none (the guest failed, the transfer
/// ended `insolvent`) or the one commit was refused — then the activation was completed on
/// its own, and the caller binds in its own commits.
///
/// # Errors
///
/// As [`activate`].
///
/// [`Store::end_activation`]: ahp_store::Store::end_activation
pub fn activate_and_bind(
    store: &SharedStore,
    sandboxes: &Sandboxes,
    transfer: &str,
    token: &str,
    lease: Duration,
) -> Result<(RunReport, Option<AgentBinding>), sandbox::Error> {
    run(store, sandboxes, transfer, token, Some(lease))
}

fn run(
    store: &SharedStore,
    sandboxes: &Sandboxes,
    transfer: &str,
    token: &str,
    lease: Option<Duration>,
) -> Result<(RunReport, Option<AgentBinding>), sandbox::Error> {
    let t = store.locked().begin_activation(transfer, token)?;
    resume(store, sandboxes, t, lease)
}

/// The rest of an activation whose `begin_activation` committed (`t`): resume the guest in a
/// fresh sandbox, then complete (and bind, with `lease`) or fail it.
fn resume(
    store: &SharedStore,
    sandboxes: &Sandboxes,
    t: Transfer,
    lease: Option<Duration>,
) -> Result<(RunReport, Option<AgentBinding>), sandbox::Error> {
    let transfer = t.id.as_str();
    let mut sandbox = match sandboxes.prepare(&t) {
        Ok(s) => s,
        Err(e) => {
            let failed = ActivationEnd::Failed {
                reason: bounded(&format!("sandbox setup failed: {e}")),
            };
            store
                .locked()
                .end_activation(transfer, &failed, &ActivationWrites::default())?;
            return Err(e);
        }
    };
    sandbox.hold_activation_writes();
    let run = sandboxes.run(&mut sandbox, Call::Resume);
    let writes = sandbox.take_activation_writes();
    let bind = lease.map(|lease| Bind {
        lease,
        wake_carrier: sandbox.takes_turns(),
    });
    let ended = end(store, transfer, run.outcome.failure_reason(), &writes, bind);
    // Err: the transfer moved under us (terminated or expired mid-activation).
    let (t, binding) = ended?;
    let report = run.report(t);
    if report.outcome.failure_reason().is_none() {
        sandboxes.keep(sandbox);
    }
    Ok((report, binding))
}

/// Ends the activation of `transfer` — completed (and bound with `bind`, when the guest resumed
/// and a bind is asked), or failed for `failure` — with the `writes` its `resume` held, in one
/// store call ([`Store::end_activation`]). Should the store refuse the bind with it, the
/// activation ends without it. Should it refuse the writes together (the transfer moved
/// meanwhile, a checkpoint it can no longer take), each is recorded on its own as it would have
/// been without holding, and then the activation ends with nothing held; a checkpoint that
/// could not be saved fails an activation that would have completed, since its guest was told
/// it was saved.
///
/// [`Store::end_activation`]: ahp_store::Store::end_activation
fn end(
    store: &SharedStore,
    transfer: &str,
    failure: Option<String>,
    writes: &ActivationWrites,
    bind: Option<Bind>,
) -> Result<(Transfer, Option<AgentBinding>), ahp_store::Error> {
    let unbound = match &failure {
        None => ActivationEnd::Completed { bind: None },
        Some(reason) => ActivationEnd::Failed {
            reason: bounded(reason),
        },
    };
    if let (None, Some(bind)) = (&failure, bind) {
        let bound = ActivationEnd::Completed { bind: Some(bind) };
        match store.locked().end_activation(transfer, &bound, writes) {
            Ok(done) => return Ok(done),
            Err(e) => {
                tracing::warn!(transfer, error = %e, "completing and binding in one commit refused; completing alone")
            }
        }
    }
    let e = match store.locked().end_activation(transfer, &unbound, writes) {
        Ok(done) => return Ok(done),
        Err(e) => e,
    };
    if writes.is_empty() {
        return Err(e);
    }
    tracing::warn!(transfer, error = %e, "the activation's writes refused together; recording them one by one");
    let saved = journal::record_one_by_one(store, transfer, writes)?;
    let end = match (unbound, saved) {
        (ActivationEnd::Completed { .. }, false) => ActivationEnd::Failed {
            reason: "the checkpoint the guest saved could not be recorded".into(),
        },
        (end, _) => end,
    };
    store
        .locked()
        .end_activation(transfer, &end, &ActivationWrites::default())
}

impl Host {
    /// [`activate`], then, once the transfer is `active`, binds it to its agent and registers this process as its carrier ([`Agents::bind`]). A binding that
    /// fails is logged, not fatal: the transfer is active (what the caller must see before it
    /// stops its source loop), its sandbox is dropped rather than kept without a carrier, and
    /// the repair of the next reaper tick (or takeover, [`Agents::repair_bindings`]) binds it;
    /// its first turn then sets up a fresh sandbox, as after a restart. Until the bind, the
    /// repair leaves the transfer to this activation ([`Agents::activating`]).
    ///
    /// # Errors
    ///
    /// As [`activate`].
    pub fn activate(&self, transfer: &str, token: &str) -> Result<RunReport, sandbox::Error> {
        let _activating = self.agents().activating(transfer);
        let t = self.store().locked().begin_activation(transfer, token)?;
        self.resume_begun(t)
    }

    /// [`activate`](Self::activate) answered with an MCP task of `owner` (the tasks extension):
    /// the activation begins — the token consumed, the task created, in one commit — and the
    /// guest resumes on a thread of its own while the caller returns the task. The activation's
    /// end (or, should this process die first, the next start's sweep of interrupted
    /// activations) ends the task in its commit.
    ///
    /// # Errors
    ///
    /// What `begin_activation` refuses (token, state; nothing changed), and the owner's task
    /// bound.
    pub fn activate_as_task(
        &self,
        transfer: &str,
        token: &str,
        owner: &CommunicationPrincipal,
    ) -> Result<McpTask, Error> {
        let (t, task) = self.store().locked().begin_activation_tracked(transfer, token, owner)?;
        let host = self.clone();
        let spawned = std::thread::Builder::new()
            .name("ahp-activation".into())
            .spawn(move || {
                let _activating = host.agents().activating(&t.id);
                let id = t.id.clone();
                if let Err(e) = host.resume_begun(t) {
                    tracing::warn!(transfer = %id, error = %e, "the activation a task stands for failed");
                }
            });
        if let Err(e) = spawned {
            let failed = ActivationEnd::Failed {
                reason: format!("the activation could not start: {e}"),
            };
            self.store()
                .locked()
                .end_activation(transfer, &failed, &ActivationWrites::default())?;
        }
        Ok(task)
    }

    /// The rest of [`activate`](Self::activate) once its `begin_activation` committed.
    fn resume_begun(&self, t: Transfer) -> Result<RunReport, sandbox::Error> {
        let transfer = t.id.clone();
        let transfer = transfer.as_str();
        let (mut report, bound) = resume(self.store(), self.sandboxes(), t, Some(agents::CARRIER_LEASE))?;
        if report.outcome.failure_reason().is_none() {
            // Bound in the completing commit, or (that refused, or the transfer not active) now.
            let bound = match bound {
                Some(b) if b.endpoint.wake_capable => self.agents().carry(&report.transfer, &b.endpoint).map(|()| b),
                Some(b) => Ok(b),
                None => self.agents().bind(&report.transfer),
            };
            match bound {
                Ok(b) => report.transfer.agent_id = Some(b.agent.id),
                Err(e) => {
                    tracing::error!(%transfer, error = %e, "activated, but binding its agent failed; the next tick binds it");
                    self.sandboxes().drop_sandbox(transfer);
                }
            }
        }
        Ok(report)
    }

    /// [`activate`](Self::activate), with a guest that did not resume turned into an error.
    ///
    /// # Errors
    ///
    /// As [`activate`](Self::activate), and [`Error::ResumeFailed`] when the guest did not resume.
    pub fn activate_checked(&self, transfer: &str, token: &str) -> Result<Transfer, Error> {
        let report = self.activate(transfer, token)?;
        match report.outcome.failure_reason() {
            None => Ok(report.transfer),
            Some(reason) => Err(Error::ResumeFailed {
                transfer: transfer.to_owned(),
                reason,
            }),
        }
    }
}
