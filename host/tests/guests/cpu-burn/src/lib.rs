//! Benchmark guest: `rounds` rounds of a 64-bit mixing function (CPU-bound, no host calls),
//! then `hostCalls` calls of `snapshot.transfer-id` (the cheapest guest→host call). Both come
//! from the tool state; `{}` means one million rounds and no calls.

use ahp_guest::{Agent, snapshot};

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Work {
    #[serde(default = "default_rounds")]
    rounds: u64,
    #[serde(default)]
    host_calls: u64,
}

fn default_rounds() -> u64 {
    1_000_000
}

struct CpuBurn;

impl Agent for CpuBurn {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let work: Work = snapshot::tool_state_as()?;
        let mut h: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..work.rounds {
            h ^= i;
            h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            h ^= h >> 31;
        }
        let mut len = 0;
        for _ in 0..work.host_calls {
            len += std::hint::black_box(snapshot::transfer_id()).len();
        }
        if std::hint::black_box(h) == 42 || len == 1 {
            return Err("improbable".into());
        }
        Ok(())
    }
}

ahp_guest::export_agent!(CpuBurn);
