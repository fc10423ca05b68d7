//! Tier → ceilings, and the resource limiter that enforces the memory and table ones.
//!
//! Every ceiling comes from the transfer's tier ([`ahp_store::TIER_LIMITS`]) and holds whatever
//! the budget: fuel per turn (set on the Store before each guest call), linear memory, table
//! elements and the counts of instances, tables and memories (this module's `Limiter`, a
//! `wasmtime::ResourceLimiter`), wall clock per turn (epoch interruption, see `engine`), egress
//! bytes and checkpoint bytes (checked by the interfaces), and the resources the host holds for
//! the guest (`host_resources`). A guest that breaks one is stopped
//! with a trap; the limiter remembers *which* ceiling so the audit event can name it.

use std::fmt;
use std::time::Duration;

use ahp_store::TierLimits;

/// One of a tier's ceilings, as named in `ceiling_exceeded` audit events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ceiling {
    /// CPU: fuel one turn may burn.
    FuelPerTurn,
    /// Linear memory size.
    Memory,
    /// Elements of any one table.
    TableElements,
    /// Number of core instances.
    Instances,
    /// Number of tables.
    Tables,
    /// Number of linear memories.
    Memories,
    /// Wall-clock time of one turn.
    WallClock,
    /// The wasm call stack (`Config::max_wasm_stack`): the same for every tier, as a deeper
    /// native stack would put the host process itself at risk.
    Stack,
    /// Outgoing HTTP bytes over the sandbox's life.
    Egress,
    /// Resources the host holds for the guest (its resource-table entries), see
    /// `host_resources`.
    HostResources,
}

impl Ceiling {
    /// The name recorded in audit events.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::FuelPerTurn => "fuel_per_turn",
            Self::Memory => "memory_bytes",
            Self::TableElements => "table_elements",
            Self::Instances => "instances",
            Self::Tables => "tables",
            Self::Memories => "memories",
            Self::WallClock => "wall_clock_per_turn",
            Self::Stack => "wasm_stack",
            Self::Egress => "egress_bytes",
            Self::HostResources => "host_resources",
        }
    }
}

impl fmt::Display for Ceiling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The ceilings one sandbox runs under: its tier's limits, possibly tightened by the host's
/// [`CeilingCap`] (never loosened). The tier's price rides along unchanged.
pub type Ceilings = TierLimits;

/// Host-wide caps that lower (never raise) every tier's ceilings: for a host that must be
/// stricter than the published tiers, and for tests that need a ceiling to bite quickly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CeilingCap {
    /// Lower bound on every tier's fuel per turn.
    pub fuel_per_turn: Option<u64>,
    /// Lower bound on every tier's wall clock per turn.
    pub wall_clock_per_turn: Option<Duration>,
    /// Lower bound on every tier's egress bytes.
    pub egress_bytes: Option<u64>,
}

impl CeilingCap {
    /// `limits`, each ceiling lowered to this cap's where it sets one.
    pub fn tighten(&self, limits: &TierLimits) -> Ceilings {
        let mut c = *limits;
        if let Some(f) = self.fuel_per_turn {
            c.fuel_per_turn = c.fuel_per_turn.min(f);
        }
        if let Some(w) = self.wall_clock_per_turn {
            c.wall_clock_per_turn = c.wall_clock_per_turn.min(w);
        }
        if let Some(e) = self.egress_bytes {
            c.egress_bytes = c.egress_bytes.min(e);
        }
        c
    }
}

/// The `ResourceLimiter` of one sandbox's Store: refuses growth past the ceilings with a trap
/// and remembers which ceiling was hit.
#[derive(Debug)]
pub(crate) struct Limiter {
    ceilings: Ceilings,
    /// The ceiling the guest broke, if any; read after a trap to name it.
    pub(crate) breach: Option<Ceiling>,
}

impl Limiter {
    pub(crate) fn new(ceilings: Ceilings) -> Self {
        Self { ceilings, breach: None }
    }

    fn refuse(&mut self, ceiling: Ceiling, desired: usize, limit: u64) -> wasmtime::Result<bool> {
        self.breach = Some(ceiling);
        Err(wasmtime::format_err!(
            "the {} ceiling of the {} tier is {limit}; the guest asked for {desired}",
            ceiling,
            self.ceilings.tier
        ))
    }
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired as u64 > self.ceilings.memory_bytes {
            return self.refuse(Ceiling::Memory, desired, self.ceilings.memory_bytes);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired as u64 > self.ceilings.table_elements {
            return self.refuse(Ceiling::TableElements, desired, self.ceilings.table_elements);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.ceilings.instances as usize
    }

    fn tables(&self) -> usize {
        self.ceilings.tables as usize
    }

    fn memories(&self) -> usize {
        self.ceilings.memories as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_store::Tier;
    use wasmtime::ResourceLimiter;

    #[test]
    fn limiter_refuses_past_the_tier_and_names_the_ceiling() {
        let c = *Tier::Nano.limits();
        let mut l = Limiter::new(c);
        assert!(l.memory_growing(0, c.memory_bytes as usize, None).unwrap());
        assert!(l.breach.is_none());
        assert!(l.memory_growing(0, c.memory_bytes as usize + 1, None).is_err());
        assert_eq!(l.breach, Some(Ceiling::Memory));
        assert!(l.table_growing(0, c.table_elements as usize + 1, None).is_err());
        assert_eq!(l.breach, Some(Ceiling::TableElements));
        assert_eq!(l.instances(), 16);
    }

    #[test]
    fn caps_only_lower() {
        let c = *Tier::Nano.limits();
        let cap = CeilingCap {
            fuel_per_turn: Some(u64::MAX),
            wall_clock_per_turn: Some(Duration::from_millis(10)),
            egress_bytes: None,
        };
        let t = cap.tighten(&c);
        assert_eq!(t.fuel_per_turn, c.fuel_per_turn);
        assert_eq!(t.wall_clock_per_turn, Duration::from_millis(10));
        assert_eq!(t.egress_bytes, c.egress_bytes);
    }
}
