//! `ahp:agent/model`: the host's model gateway, as the guest sees it.
//!
//! This host offers no models yet: `models` is empty and every request names an unknown model.

use super::bindings::v0_3::ahp::agent::model::{Completion, Error, Host, ModelInfo, Request, Reservation};
use super::context::AgentCtx;

impl Host for AgentCtx {
    fn models(&mut self) -> Vec<ModelInfo> {
        Vec::new()
    }

    fn estimate(&mut self, request: Request) -> Result<Reservation, Error> {
        Err(Error::UnknownModel(request.model))
    }

    async fn complete(&mut self, request: Request) -> Result<Completion, Error> {
        Err(Error::UnknownModel(request.model))
    }
}
