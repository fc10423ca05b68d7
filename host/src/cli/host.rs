//! `ahp host list`: the hosts of the database — which `ahp serve` processes joined it, their
//! incarnation, state, address and lease, and who claimed a lapsed one's agents.

use clap::Subcommand;

use super::{DataDir, table};

#[derive(Debug, Subcommand)]
pub(crate) enum HostCommand {
    /// List the hosts by id.
    List,
}

pub(crate) fn run(dir: &DataDir, command: HostCommand) -> anyhow::Result<()> {
    let mut store = dir.open_store()?;
    match command {
        HostCommand::List => {
            let now = store.now();
            let rows: Vec<Vec<String>> = store
                .hosts()?
                .iter()
                .map(|h| {
                    let state = if h.state == ahp_store::HostState::Live && !h.is_live(now) {
                        "lapsed".to_owned()
                    } else {
                        serde_json::to_value(h.state)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    };
                    vec![
                        h.id.clone(),
                        h.incarnation.to_string(),
                        state,
                        h.address.clone().unwrap_or_default(),
                        h.lease_expires_at.to_string(),
                        h.claimed_by.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            print!(
                "{}",
                table::render(
                    &["id", "incarnation", "state", "address", "lease until", "claimed by"],
                    &rows
                )
            );
        }
    }
    Ok(())
}
