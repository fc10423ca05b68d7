//! Host-held resources: what a guest makes the *host* keep for it outside its linear memory,
//! and the ceiling that bounds it (`host_resources`).
//!
//! A guest's WASI and `wasi:http` resources — `fields`, requests, bodies and their buffered
//! chunks, streams, pollables — live in the sandbox's `ResourceTable`, in host memory, where
//! the linear-memory limiter cannot see them. Unbounded, a `nano` guest (32 MiB of linear
//! memory) once made its host grow by ~900 MiB by keeping 8,000 `fields` of 120 KB. So every
//! sandbox's table and the largest thing one entry may hold are both bounded, and their product
//! is the tier's memory ceiling:
//!
//! - **One entry holds at most [`MAX_ENTRY_BYTES`] (256 KiB)** of what the guest put in it: a
//!   `fields` is refused past [`FIELD_SIZE_LIMIT`] (128 KiB, `WasiHttpCtx::set_field_size_limit`;
//!   wasmtime counts each name and value plus its `HeaderName`/`HeaderValue` struct); an
//!   outgoing request holds its headers (a `fields`), a path of at most 64 KiB (the `http`
//!   crate's URI limit) and an authority and method of at most [`MAX_REQUEST_NAME_BYTES`] each
//!   (`interfaces::wasi` refuses longer ones); an outgoing body buffers at most two chunks of
//!   [`BODY_CHUNK_BYTES`] (the `WasiHttpHooks` chunk hooks).
//! - **A table holds at most [`table_capacity`] entries**: the tier's memory ceiling divided
//!   by [`MAX_ENTRY_BYTES`] (`nano`: 128, `small`: 1,024, `large`: 8,192), set with
//!   `ResourceTable::set_max_capacity`. One HTTP request in flight takes about eight entries
//!   (request, body, its stream, the response future, its pollable, the response, its body and
//!   stream), so a `nano` guest can have a dozen requests in flight.
//! - What the *network* sends (response heads, body frames waiting to be read) is counted
//!   against the egress ceiling, so it is at most the tier's `egress_bytes` over the
//!   sandbox's life.
//!
//! - What one host call copies in from the guest's memory (its arguments) is at most
//!   [`hostcall_copy_bytes`]: the memory ceiling, at most [`MAX_HOSTCALL_COPY_BYTES`]
//!   (wasmtime's per-call copy budget, `Store::set_hostcall_fuel`, which the sandbox sets; its
//!   default is 128 MiB whatever the tier). A guest makes one call at a time, so this is held
//!   once. The imports whose arguments are lists of strings or lists are weighed in the
//!   guest's memory against their own, far smaller, bounds before anything is copied
//!   (`interfaces::bounded`); the budget bounds the rest.
//!
//! So a guest can make its host hold at most its memory ceiling in table entries, plus a fixed
//! overhead: [`ENTRY_OVERHEAD_BYTES`] of bookkeeping per entry, the guest log
//! ([`MAX_GUEST_LOG_BYTES`](super::MAX_GUEST_LOG_BYTES)), the egress ceiling and one call's
//! arguments; [`host_bytes_bound`] is that sum (nano: 32 MiB + 32 MiB + 4.4 MiB). A guest that
//! asks for one entry more (wasmtime's `ResourceTableError::Full`), or whose call would copy
//! more than the budget, traps, and the turn ends with `ceiling_exceeded` naming
//! `host_resources`, under the same breach policy as every other ceiling.

use wasmtime::component::ResourceTableError;

use super::limits::Ceilings;

/// The most host memory one resource-table entry may hold for a guest, in bytes: an outgoing
/// request's headers, path, authority and method together.
pub const MAX_ENTRY_BYTES: u64 = 256 * 1024;

pub use crate::interfaces::wasi::FIELD_SIZE_LIMIT;

pub use crate::interfaces::wasi::MAX_REQUEST_NAME_BYTES;

/// Longest path with query the `http` crate accepts (its `MAX_LEN`).
pub const MAX_PATH_BYTES: usize = 64 * 1024 - 2;

pub use crate::egress::BODY_CHUNK_BYTES;

/// Bookkeeping the host keeps per table entry beyond what the guest put in it (the entry, its
/// boxed resource struct, a request's scheme/method/options), over-estimated.
pub const ENTRY_OVERHEAD_BYTES: u64 = 1024;

/// The most [`hostcall_copy_bytes`] allows, whatever the tier: the largest legitimate call (a
/// `large` checkpoint of 16 MiB) fits four times over.
pub const MAX_HOSTCALL_COPY_BYTES: u64 = 64 * 1024 * 1024;

/// What one host call of a sandbox under `ceilings` may copy in from the guest: its memory
/// ceiling, at most [`MAX_HOSTCALL_COPY_BYTES`].
pub fn hostcall_copy_bytes(ceilings: &Ceilings) -> usize {
    usize::try_from(ceilings.memory_bytes.min(MAX_HOSTCALL_COPY_BYTES)).unwrap_or(usize::MAX)
}

/// Most resource-table entries a sandbox under `ceilings` may hold at once: its memory ceiling
/// divided by [`MAX_ENTRY_BYTES`].
pub fn table_capacity(ceilings: &Ceilings) -> usize {
    usize::try_from(ceilings.memory_bytes / MAX_ENTRY_BYTES).unwrap_or(usize::MAX)
}

/// The most host memory a guest under `ceilings` can make its host hold: the memory ceiling
/// in resources (a full table of the largest entries), the per-entry overhead, the guest log,
/// what the network may send it (the egress ceiling) and one call's arguments.
pub fn host_bytes_bound(ceilings: &Ceilings) -> u64 {
    let entries = table_capacity(ceilings) as u64;
    entries * (MAX_ENTRY_BYTES + ENTRY_OVERHEAD_BYTES)
        + super::MAX_GUEST_LOG_BYTES as u64
        + ceilings.egress_bytes
        + hostcall_copy_bytes(ceilings) as u64
}

/// Whether a guest call failed because the sandbox's resource table was full, or because a
/// host call would have copied more than [`hostcall_copy_bytes`] (wasmtime's error type for
/// that is private: it is recognised by its text).
pub(crate) fn is_host_resources_breach(e: &wasmtime::Error) -> bool {
    let text = format!("{e:#}");
    e.chain()
        .any(|c| matches!(c.downcast_ref::<ResourceTableError>(), Some(ResourceTableError::Full)))
        || text.contains(&ResourceTableError::Full.to_string())
        || text.contains(COPY_BUDGET_SPENT)
}

/// What wasmtime 48 says when a call's copy budget is spent.
const COPY_BUDGET_SPENT: &str = "fuel allocated for hostcalls has been exhausted";

#[cfg(test)]
mod tests {
    use super::*;
    use ahp_store::Tier;

    #[test]
    fn the_table_times_its_largest_entry_is_the_memory_ceiling() {
        for tier in [Tier::Nano, Tier::Small, Tier::Large] {
            let c = tier.limits();
            assert_eq!(table_capacity(c) as u64 * MAX_ENTRY_BYTES, c.memory_bytes, "{tier}");
        }
        assert_eq!(table_capacity(Tier::Nano.limits()), 128);
        // Two buffered body chunks fit one entry, and so does the largest request.
        assert!(2 * BODY_CHUNK_BYTES as u64 <= MAX_ENTRY_BYTES);
        assert!((FIELD_SIZE_LIMIT + MAX_PATH_BYTES + 2 * MAX_REQUEST_NAME_BYTES) as u64 <= MAX_ENTRY_BYTES);
        let nano = Tier::Nano.limits();
        assert_eq!(
            host_bytes_bound(nano),
            32 * 1024 * 1024 + 128 * 1024 + 256 * 1024 + 4 * 1024 * 1024 + 32 * 1024 * 1024
        );
        // One call may copy the memory ceiling, at most 64 MiB; a large checkpoint fits.
        assert_eq!(hostcall_copy_bytes(nano), 32 * 1024 * 1024);
        let large = Tier::Large.limits();
        assert_eq!(hostcall_copy_bytes(large), 64 * 1024 * 1024);
        assert!(large.checkpoint_bytes <= MAX_HOSTCALL_COPY_BYTES / 4);
    }

    #[test]
    fn a_full_table_and_a_spent_copy_budget_are_recognised_through_context() {
        let mut table = wasmtime::component::ResourceTable::new();
        table.set_max_capacity(1);
        table.push(1u8).unwrap();
        let err = table.push(2u8).unwrap_err();
        let e = wasmtime::Error::from(err).context("[new_fields] pushing fields");
        assert!(is_host_resources_breach(&e));
        assert!(!is_host_resources_breach(&wasmtime::format_err!("something else")));
        // wasmtime's own words when a call's copy budget is spent.
        let spent = wasmtime::format_err!(
            "too much data is being copied between the host and the guest: fuel allocated for hostcalls has been exhausted"
        );
        assert!(is_host_resources_breach(&spent.context("lifting the arguments")));
    }
}
