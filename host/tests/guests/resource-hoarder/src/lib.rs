//! Hostile guest: creates `count` (default 8,000) `wasi:http` `fields` of one 120 KB header
//! each and keeps every one, so that the host — not the guest's linear memory — holds the
//! bytes (8,000 × 120 KB is ~940 MB). The value is one buffer reused for every call, so the
//! guest's own memory stays small. Resumes only if the host let it keep them all; creates no
//! other resource, so `count` is exactly the table entries it asks for.

use ahp_guest::{Agent, snapshot};
use wasip2::http::types::Fields;

#[derive(serde::Deserialize)]
struct Plan {
    #[serde(default = "default_count")]
    count: usize,
}

fn default_count() -> usize {
    8_000
}

struct ResourceHoarder;

impl Agent for ResourceHoarder {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let plan: Plan = snapshot::tool_state_as()?;
        let entry = [("x-hoard".to_owned(), vec![b'a'; 120_000])];
        let mut kept = Vec::with_capacity(plan.count);
        for i in 0..plan.count {
            match Fields::from_list(&entry) {
                Ok(f) => kept.push(f),
                Err(e) => return Err(format!("fields {i} refused: {e:?}").into()),
            }
        }
        // Nothing printed: a stdout stream would be one more table entry.
        std::hint::black_box(&kept);
        Ok(())
    }
}

ahp_guest::export_agent!(ResourceHoarder);
