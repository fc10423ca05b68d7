//! A guest component for whichever version of the contract it was built: `ahp:agent@0.3.0`
//! (activation, conversation turns, the model gateway and MCP tools), `@0.2.0` (activation and
//! conversation turns) or `@0.1.0` (activation only).

use wasmtime::Store;
use wasmtime::component::InstancePre;

use super::state::SandboxState;
use crate::interfaces::bindings::{v0_1, v0_3};

/// A component ready to instantiate.
#[derive(Clone)]
pub(crate) enum AgentPre {
    /// Built for `ahp:agent@0.3.0` or `@0.2.0` (activation and turns).
    Current(v0_3::AgentPre<SandboxState>),
    /// Built for `ahp:agent@0.1.0`.
    V1(v0_1::AgentPre<SandboxState>),
}

impl AgentPre {
    /// The typed form of `pre`: the current world if the component exports `turn`, else 0.1.0.
    /// The 0.3.0 and 0.2.0 worlds export the same two functions (`resume`, `turn`), so a 0.2.0
    /// component is called through the current world's exports; its imports were linked from
    /// its own version (see `interfaces`).
    ///
    /// # Errors
    ///
    /// If the component exports no world's functions.
    pub(crate) fn new(pre: InstancePre<SandboxState>) -> wasmtime::Result<Self> {
        match v0_3::AgentPre::new(pre.clone()) {
            Ok(p) => Ok(Self::Current(p)),
            Err(current) => v0_1::AgentPre::new(pre)
                .map(Self::V1)
                .map_err(|_| current.context("the component exports no ahp:agent world (0.3.0, 0.2.0 or 0.1.0)")),
        }
    }

    /// Whether the component exports `turn` (conversation turns).
    pub(crate) fn takes_turns(&self) -> bool {
        matches!(self, Self::Current(_))
    }

    /// Instantiates the component in `store`.
    pub(crate) async fn instantiate_async(&self, store: &mut Store<SandboxState>) -> wasmtime::Result<AgentInstance> {
        Ok(match self {
            Self::Current(p) => AgentInstance::Current(p.instantiate_async(store).await?),
            Self::V1(p) => AgentInstance::V1(p.instantiate_async(store).await?),
        })
    }
}

/// An instantiated guest.
pub(crate) enum AgentInstance {
    /// Built for `ahp:agent@0.3.0` or `@0.2.0` (activation and turns).
    Current(v0_3::Agent),
    /// Built for `ahp:agent@0.1.0`.
    V1(v0_1::Agent),
}

impl AgentInstance {
    /// Calls the guest's `resume`.
    pub(crate) async fn call_resume(&self, store: &mut Store<SandboxState>) -> wasmtime::Result<Result<(), String>> {
        match self {
            Self::Current(a) => a.call_resume(store).await,
            Self::V1(a) => a.call_resume(store).await,
        }
    }

    /// Calls the guest's `turn`; a 0.1.0 guest has none and answers with an error.
    pub(crate) async fn call_turn(&self, store: &mut Store<SandboxState>) -> wasmtime::Result<Result<(), String>> {
        match self {
            Self::Current(a) => a.call_turn(store).await,
            Self::V1(_) => Ok(Err(
                "built for ahp:agent@0.1.0, which has no conversation turn".to_owned()
            )),
        }
    }
}
