//! The inventory-forecasting agent: resumes a transferred session, forecasts reorders for the
//! inventory in its tool state, checkpoints the forecast and reports its model spend. Once
//! active it answers questions about that forecast in conversation: a question naming a SKU
//! gets that SKU's reorder, one about reorders or the forecast gets the whole list, anything
//! else a short help text.

use ahp_guest::{Agent, checkpoint, conversations, credentials, snapshot};
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
#[serde(rename_all = "camelCase", default)]
struct Forecast {
    turn: u32,
    messages_seen: u32,
    reorders: Vec<(String, u64)>,
    questions_answered: u64,
}

/// The most SKUs one answer lists: 20 SKUs stay readable, and far below a reply's 64 KiB.
const LISTED: usize = 20;

struct Forecaster;

impl Agent for Forecaster {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let inventory = inventory()?;
        let servers = snapshot::mcp_servers();
        let server = servers.first().ok_or("no inventory server")?;
        if credentials::resolve(&server.cred_ref)?.value().is_empty() {
            return Err("empty inventory credential".into());
        }
        let history = snapshot::history()?;
        let mut forecast: Forecast = checkpoint::load()?.unwrap_or_default();
        forecast.turn += 1;
        forecast.messages_seen = history.len() as u32;
        forecast.reorders = reorders(&inventory);
        checkpoint::save(&forecast)?;
        let (id, n) = (snapshot::transfer_id(), forecast.reorders.len());
        println!("{id}: {n} reorders on turn {}", forecast.turn);
        Ok(())
    }

    fn turn() -> Result<(), Box<dyn std::error::Error>> {
        let inventory = inventory()?;
        // After a host restart the sandbox is fresh and may run a turn before any `resume`.
        let mut forecast = checkpoint::load()?.unwrap_or_else(|| Forecast {
            reorders: reorders(&inventory),
            ..Forecast::default()
        });
        // A turn makes at most MAX_REPLIES replies; the rest wait for the next wake.
        for delivery in conversations::inbox().take(conversations::MAX_REPLIES) {
            let delivery = delivery?;
            let question = &delivery.message().body;
            delivery.reply(&answer(question, &inventory, &forecast.reorders))?;
            delivery.consume()?;
            forecast.questions_answered += 1;
            checkpoint::save(&forecast)?;
        }
        Ok(())
    }
}

/// The inventory the source session's tool left at `/inventory` in its tool state.
fn inventory() -> Result<Vec<Item>, Box<dyn std::error::Error>> {
    Ok(snapshot::tool_state_at("/inventory")?)
}

/// Every SKU that needs a reorder, with its quantity, in inventory order.
fn reorders(inventory: &[Item]) -> Vec<(String, u64)> {
    inventory.iter().filter_map(reorder).collect()
}

/// Reorder enough to cover twice the lead time when stock runs out within it.
fn reorder(item: &Item) -> Option<(String, u64)> {
    let days = item.daily_sales.len().max(1) as u64;
    let per_day = item.daily_sales.iter().sum::<u64>().div_ceil(days);
    let need = per_day * item.lead_time_days;
    (item.on_hand < need).then(|| (item.sku.clone(), 2 * need - item.on_hand))
}

/// The answer to `question`: the reorder of the first SKU it names (case-insensitive, as a
/// whole word), else the whole forecast if it asks about reorders or the forecast, else help.
fn answer(question: &str, inventory: &[Item], reorders: &[(String, u64)]) -> String {
    let words: Vec<&str> = question
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
        .collect();
    let named = inventory
        .iter()
        .find(|i| words.iter().any(|w| w.eq_ignore_ascii_case(&i.sku)));
    if let Some(item) = named {
        return match reorders.iter().find(|(sku, _)| *sku == item.sku) {
            Some((sku, quantity)) => format!("Reorder {quantity} units of {sku}."),
            None => format!("{} needs no reorder: its stock covers its lead time.", item.sku),
        };
    }
    let lower = question.to_lowercase();
    if !(lower.contains("reorder") || lower.contains("forecast")) {
        let skus = listing(inventory.iter().map(|i| i.sku.clone()));
        return format!(
            "I forecast reorders for this inventory. Ask me about the reorders or the forecast, \
             or name a SKU ({skus}) for its reorder quantity."
        );
    }
    if reorders.is_empty() {
        return "No SKU needs a reorder: every stock covers its lead time.".to_owned();
    }
    let list = listing(reorders.iter().map(|(sku, quantity)| format!("{sku}: {quantity}")));
    format!("Reorders: {list}.")
}

/// At most [`LISTED`] entries joined by commas, then how many more there are: an inventory can
/// be far longer than one reply may be (64 KiB).
fn listing(entries: impl ExactSizeIterator<Item = String>) -> String {
    let more = entries.len().saturating_sub(LISTED);
    let mut list = entries.take(LISTED).collect::<Vec<_>>().join(", ");
    if more > 0 {
        list.push_str(&format!(" and {more} more"));
    }
    list
}

ahp_guest::export_agent!(Forecaster);

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory() -> Vec<Item> {
        let item = |sku: &str, on_hand, lead_time_days| Item {
            sku: sku.to_owned(),
            on_hand,
            daily_sales: vec![5, 6, 4],
            lead_time_days,
        };
        vec![item("A-1", 10, 7), item("B-2", 500, 3), item("A-10", 0, 1)]
    }

    #[test]
    fn a_named_sku_gets_its_reorder_or_none() {
        let inventory = inventory();
        let reorders = reorders(&inventory);
        assert_eq!(reorders, vec![("A-1".to_owned(), 60), ("A-10".to_owned(), 10)]);
        assert_eq!(
            answer("How many a-1?", &inventory, &reorders),
            "Reorder 60 units of A-1."
        );
        assert_eq!(answer("and A-10", &inventory, &reorders), "Reorder 10 units of A-10.");
        assert_eq!(
            answer("reorder B-2?", &inventory, &reorders),
            "B-2 needs no reorder: its stock covers its lead time."
        );
    }

    #[test]
    fn a_question_about_the_forecast_gets_the_list() {
        let inventory = inventory();
        let reorders = reorders(&inventory);
        assert_eq!(
            answer("What should I REORDER?", &inventory, &reorders),
            "Reorders: A-1: 60, A-10: 10."
        );
        assert_eq!(
            answer("the forecast?", &inventory, &[]),
            "No SKU needs a reorder: every stock covers its lead time."
        );
    }

    #[test]
    fn a_long_list_is_cut_short() {
        let list = listing((0..25).map(|i| format!("S-{i}")));
        assert!(
            list.starts_with("S-0, S-1, ") && list.ends_with("S-19 and 5 more"),
            "{list}"
        );
    }

    #[test]
    fn anything_else_gets_help_naming_the_skus() {
        let inventory = inventory();
        let help = answer("hello", &inventory, &reorders(&inventory));
        assert!(
            help.contains("reorders or the forecast") && help.contains("(A-1, B-2, A-10)"),
            "{help}"
        );
    }
}
