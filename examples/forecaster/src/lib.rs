//! The inventory-forecasting agent: resumes a transferred session, forecasts reorders for the
//! inventory in its tool state, checkpoints the forecast and reports its model spend.

use ahp_guest::{Agent, checkpoint, credentials, metering, snapshot};
use serde::{Deserialize, Serialize};

/// One SKU as the source session's inventory tool left it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Item {
    sku: String,
    on_hand: u64,
    daily_sales: Vec<u64>,
    lead_time_days: u64,
}

/// What the agent remembers between turns.
#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Forecast {
    turn: u32,
    messages_seen: u32,
    reorders: Vec<(String, u64)>,
}

struct Forecaster;

impl Agent for Forecaster {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let inventory: Vec<Item> = snapshot::tool_state_at("/inventory")?;
        let servers = snapshot::mcp_servers();
        let server = servers.first().ok_or("no inventory server")?;
        if credentials::resolve(&server.cred_ref)?.value().is_empty() {
            return Err("empty inventory credential".into());
        }
        let history = snapshot::history()?;
        let mut forecast: Forecast = checkpoint::load()?.unwrap_or_default();
        forecast.turn += 1;
        forecast.messages_seen = history.len() as u32;
        forecast.reorders = inventory.iter().filter_map(reorder).collect();
        checkpoint::save(&forecast)?;
        // Model tokens: one micro-USD per message of context, the system prompt included.
        let context = u64::from(!snapshot::system_prompt().is_empty()) + history.len() as u64;
        metering::report("model_tokens", context)?;
        let (id, n) = (snapshot::transfer_id(), forecast.reorders.len());
        println!("{id}: {n} reorders on turn {}", forecast.turn);
        Ok(())
    }
}

/// Reorder enough to cover twice the lead time when stock runs out within it.
fn reorder(item: &Item) -> Option<(String, u64)> {
    let days = item.daily_sales.len().max(1) as u64;
    let per_day = item.daily_sales.iter().sum::<u64>().div_ceil(days);
    let need = per_day * item.lead_time_days;
    (item.on_hand < need).then(|| (item.sku.clone(), 2 * need - item.on_hand))
}

ahp_guest::export_agent!(Forecaster);
