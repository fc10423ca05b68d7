//! A guest built for the old `ahp:agent@0.1.0` world — no `conversations` import, no `turn`
//! export — straight from `wit/v0.1.0` with `wit-bindgen`, not the SDK (which follows the
//! current world). It proves that components built before 0.2.0 keep activating: `resume`
//! reads the snapshot's transfer id and message count, checkpoints them as
//! `{"transferId":…,"messageCount":…}`, prints `<transfer id>: legacy agent resumed after <n>
//! messages` and returns `Ok`.

mod wit {
    wit_bindgen::generate!({
        path: "../../../../wit/v0.1.0",
        world: "ahp:agent/agent",
    });
}

use wit::ahp::agent::{checkpoint, snapshot};

struct LegacyAgent;

impl wit::Guest for LegacyAgent {
    fn resume() -> Result<(), String> {
        let transfer_id = snapshot::transfer_id();
        let message_count = snapshot::message_count();
        // A transfer id is `tr_` and URL-safe characters: nothing to escape in JSON.
        let state = format!(r#"{{"transferId":"{transfer_id}","messageCount":{message_count}}}"#);
        checkpoint::save(state.as_bytes()).map_err(|e| format!("checkpoint refused: {e:?}"))?;
        println!("{transfer_id}: legacy agent resumed after {message_count} messages");
        Ok(())
    }
}

wit::export!(LegacyAgent with_types_in wit);
