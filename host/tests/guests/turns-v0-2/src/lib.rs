//! A guest built for the frozen `ahp:agent@0.2.0` world — conversation turns, no `model`, no
//! `tools` — straight from `wit/v0.2.0` with `wit-bindgen`, not the SDK (which follows the
//! current world). It proves that components built before 0.3.0 keep taking turns: each turn
//! answers every queued delivery with `0.2.0 heard: <body>` and consumes it.

mod wit {
    wit_bindgen::generate!({
        path: "../../../../wit/v0.2.0",
        world: "ahp:agent/agent",
    });
}

use wit::ahp::agent::conversations;

struct TurnsV02;

impl wit::Guest for TurnsV02 {
    fn resume() -> Result<(), String> {
        Ok(())
    }

    fn turn() -> Result<(), String> {
        let wake = conversations::current_wake().ok_or("a turn without a wake")?;
        let mut after = 0;
        loop {
            let page = conversations::inbox(after, 64, true).map_err(|e| format!("inbox: {e:?}"))?;
            let Some(last) = page.last() else { break };
            after = last.order;
            for d in &page {
                if matches!(&d.message.author, conversations::Author::Agent(id) if *id == wake.agent_id) {
                    continue;
                }
                let answer = format!("0.2.0 heard: {}", d.message.body);
                conversations::reply(&d.message.conversation_id, Some(&d.message.id), &answer)
                    .map_err(|e| format!("reply: {e:?}"))?;
                conversations::consume(&d.message.id).map_err(|e| format!("consume: {e:?}"))?;
            }
        }
        Ok(())
    }
}

wit::export!(TurnsV02 with_types_in wit);
