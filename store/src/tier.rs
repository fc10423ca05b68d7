//! Tiers: the hard ceilings and the price of a destination sandbox, in one table.
//!
//! A tier is picked by `provision_runtime`. Its ceilings hold regardless of budget — a runaway
//! guest cannot spend its way past them — and the sandbox enforces every one of them
//! ([`TIER_LIMITS`] is the single source). Its price converts the fuel a guest burned into
//! micro-USD.
//!
//! **Fuel and CPU-seconds.** wasmtime charges one unit of fuel per executed WebAssembly
//! operator (a few cheap ones are free). ahp defines one *CPU-second* as
//! [`FUEL_PER_CPU_SECOND`] = 10⁹ units of fuel: about one second of Cranelift-compiled code on
//! the development machine, and, more importantly, a fixed exchange rate, so the same guest
//! costs the same on any host whatever its clock speed. A guest's compute charge is
//! `ceil(fuel × price_micro_usd_per_cpu_second / 10⁹)`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Units of wasmtime fuel that make one billed CPU-second.
pub const FUEL_PER_CPU_SECOND: u64 = 1_000_000_000;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// A destination size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// For small tool-calling loops: tight ceilings, cheapest.
    Nano,
    /// The default for an ordinary agent session.
    Small,
    /// For agents that keep large working sets or run long turns.
    Large,
}

impl Tier {
    /// Every tier, smallest first.
    pub const ALL: [Tier; 3] = [Tier::Nano, Tier::Small, Tier::Large];

    /// The tier's name as stored and accepted by `provision_runtime`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Nano => "nano",
            Self::Small => "small",
            Self::Large => "large",
        }
    }

    /// This tier's ceilings and price.
    pub const fn limits(self) -> &'static TierLimits {
        match self {
            Self::Nano => &TIER_LIMITS[0],
            Self::Small => &TIER_LIMITS[1],
            Self::Large => &TIER_LIMITS[2],
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tier name that is not one of [`Tier::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tier {0:?} (expected nano, small or large)")]
pub struct UnknownTier(pub String);

impl FromStr for Tier {
    type Err = UnknownTier;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownTier(s.to_owned()))
    }
}

/// The ceilings and price of one tier. Every ceiling is enforced by the sandbox on every turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TierLimits {
    /// The tier these limits belong to.
    pub tier: Tier,
    /// CPU ceiling: fuel one guest call (a *turn*) may burn, whatever the budget.
    pub fuel_per_turn: u64,
    /// Largest linear memory a guest may grow, in bytes.
    pub memory_bytes: u64,
    /// Most elements any one table may hold.
    pub table_elements: u64,
    /// Most tables across the guest's instances.
    pub tables: u32,
    /// Most linear memories across the guest's instances.
    pub memories: u32,
    /// Most core instances a component may create.
    pub instances: u32,
    /// Wall-clock ceiling for one turn, enforced with epoch interruption.
    pub wall_clock_per_turn: Duration,
    /// Outgoing HTTP bytes (requests and responses together) over the sandbox's life.
    pub egress_bytes: u64,
    /// Largest checkpoint (durable working memory) the guest may save.
    pub checkpoint_bytes: u64,
    /// Price of one CPU-second ([`FUEL_PER_CPU_SECOND`] fuel), in micro-USD.
    pub price_micro_usd_per_cpu_second: u64,
}

/// The tier table: the one place ceilings and prices are written down.
///
/// Why these values: `nano` fits a tool-calling loop that mostly waits on the network (¼ CPU-s
/// and 32 MiB per turn); `small` covers ordinary agents, including JSON-heavy planning (5 CPU-s,
/// 256 MiB); `large` is for long analytical turns (30 CPU-s, 2 GiB) and is the most a single
/// 2-core, 24 GiB host should hand to one guest. Wall-clock ceilings are a few times the CPU
/// ceiling so a guest blocked on the host is still stopped. Prices rise faster than size, as
/// reserved memory is the scarce resource on a dense host.
pub const TIER_LIMITS: [TierLimits; 3] = [
    TierLimits {
        tier: Tier::Nano,
        fuel_per_turn: FUEL_PER_CPU_SECOND / 4,
        memory_bytes: 32 * MIB,
        table_elements: 10_000,
        tables: 4,
        memories: 1,
        instances: 16,
        wall_clock_per_turn: Duration::from_secs(2),
        egress_bytes: 4 * MIB,
        checkpoint_bytes: 64 * KIB,
        price_micro_usd_per_cpu_second: 20,
    },
    TierLimits {
        tier: Tier::Small,
        fuel_per_turn: 5 * FUEL_PER_CPU_SECOND,
        memory_bytes: 256 * MIB,
        table_elements: 100_000,
        tables: 8,
        memories: 2,
        instances: 32,
        wall_clock_per_turn: Duration::from_secs(15),
        egress_bytes: 64 * MIB,
        checkpoint_bytes: MIB,
        price_micro_usd_per_cpu_second: 60,
    },
    TierLimits {
        tier: Tier::Large,
        fuel_per_turn: 30 * FUEL_PER_CPU_SECOND,
        memory_bytes: 2 * GIB,
        table_elements: 1_000_000,
        tables: 16,
        memories: 4,
        instances: 64,
        wall_clock_per_turn: Duration::from_secs(90),
        egress_bytes: 512 * MIB,
        checkpoint_bytes: 16 * MIB,
        price_micro_usd_per_cpu_second: 250,
    },
];

impl TierLimits {
    /// What burning `fuel` costs at this tier, in micro-USD, rounded up: any work at all costs
    /// at least one micro-USD, so spend can never be hidden in rounding.
    pub fn compute_cost_micro_usd(&self, fuel: u64) -> u64 {
        let cost = u128::from(fuel) * u128::from(self.price_micro_usd_per_cpu_second);
        u64::try_from(cost.div_ceil(u128::from(FUEL_PER_CPU_SECOND))).unwrap_or(u64::MAX)
    }

    /// The most fuel `micro_usd` can pay for at this tier (rounded down), capped at
    /// [`fuel_per_turn`](Self::fuel_per_turn). A free tier gets the full turn.
    pub fn fuel_affordable(&self, micro_usd: u64) -> u64 {
        if self.price_micro_usd_per_cpu_second == 0 {
            return self.fuel_per_turn;
        }
        let fuel =
            u128::from(micro_usd) * u128::from(FUEL_PER_CPU_SECOND) / u128::from(self.price_micro_usd_per_cpu_second);
        u64::try_from(fuel).unwrap_or(u64::MAX).min(self.fuel_per_turn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_ordered_and_names_round_trip() {
        for (i, t) in Tier::ALL.into_iter().enumerate() {
            assert_eq!(TIER_LIMITS[i].tier, t);
            assert_eq!(t.as_str().parse::<Tier>(), Ok(t));
        }
        assert!("medium".parse::<Tier>().is_err());
        for w in TIER_LIMITS.windows(2) {
            assert!(w[0].fuel_per_turn < w[1].fuel_per_turn);
            assert!(w[0].memory_bytes < w[1].memory_bytes);
            assert!(w[0].price_micro_usd_per_cpu_second < w[1].price_micro_usd_per_cpu_second);
        }
    }

    #[test]
    fn compute_cost_rounds_up_and_affordable_fuel_rounds_down() {
        let nano = Tier::Nano.limits();
        assert_eq!(nano.compute_cost_micro_usd(0), 0);
        assert_eq!(nano.compute_cost_micro_usd(1), 1);
        assert_eq!(nano.compute_cost_micro_usd(FUEL_PER_CPU_SECOND), 20);
        assert_eq!(nano.fuel_affordable(1), FUEL_PER_CPU_SECOND / 20);
        // What a budget can pay for never costs more than the budget.
        for budget in [1, 7, 19, 1_000] {
            let fuel = nano.fuel_affordable(budget);
            assert!(nano.compute_cost_micro_usd(fuel) <= budget);
        }
        assert_eq!(nano.fuel_affordable(u64::MAX), nano.fuel_per_turn);
    }
}
