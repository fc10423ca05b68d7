//! Hostile guest: recurses without end until the host's wasm stack ceiling stops it.

use ahp_guest::{Agent, snapshot};

/// Work after the recursive call keeps it from becoming a loop.
#[inline(never)]
fn descend(n: u64) -> u64 {
    if n == 0 {
        return 1;
    }
    let below = descend(std::hint::black_box(n - 1));
    below.rotate_left(7) ^ n
}

struct DeepRecursion;

impl Agent for DeepRecursion {
    fn resume() -> Result<(), Box<dyn std::error::Error>> {
        let depth = u64::MAX - u64::from(snapshot::message_count());
        Err(format!("came back from the bottom: {}", descend(depth)).into())
    }
}

ahp_guest::export_agent!(DeepRecursion);
