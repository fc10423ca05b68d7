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
//! So a guest can make its host hold at most its memory ceiling in table entries, plus a fixed
//! overhead: [`ENTRY_OVERHEAD_BYTES`] of bookkeeping per entry, the guest log
//! ([`MAX_GUEST_LOG_BYTES`](super::MAX_GUEST_LOG_BYTES)) and the egress ceiling;
//! [`host_bytes_bound`] is that sum (nano: 32 MiB + 4.4 MiB). A guest that asks for one entry
//! more traps (wasmtime's `ResourceTableError::Full`), and the turn ends with
//! `ceiling_exceeded` naming `host_resources`, under the same breach policy as every other
//! ceiling.

use wasmtime::component::ResourceTableError;

use super::limits::Ceilings;

/// The most host memory one resource-table entry may hold for a guest, in bytes: an outgoing
/// request's headers, path, authority and method together.
pub const MAX_ENTRY_BYTES: u64 = 256 * 1024;

/// The `wasi:http` field-size limit of every sandbox: one `fields` (headers or trailers) may
/// hold this many accounted bytes. wasmtime's default, which any real header set fits.
pub const FIELD_SIZE_LIMIT: usize = 128 * 1024;

pub use crate::interfaces::wasi::MAX_REQUEST_NAME_BYTES;

/// Longest path with query the `http` crate accepts (its `MAX_LEN`).
pub const MAX_PATH_BYTES: usize = 64 * 1024 - 2;

/// Largest write into an outgoing body's stream; the body buffers at most two such chunks
/// before the network takes them (wasmtime's default is 1 MiB, i.e. 2 MiB per body).
pub const BODY_CHUNK_BYTES: usize = 64 * 1024;

/// Bookkeeping the host keeps per table entry beyond what the guest put in it (the entry, its
/// boxed resource struct, a request's scheme/method/options), over-estimated.
pub const ENTRY_OVERHEAD_BYTES: u64 = 1024;

/// Most resource-table entries a sandbox under `ceilings` may hold at once: its memory ceiling
/// divided by [`MAX_ENTRY_BYTES`].
pub fn table_capacity(ceilings: &Ceilings) -> usize {
    usize::try_from(ceilings.memory_bytes / MAX_ENTRY_BYTES).unwrap_or(usize::MAX)
}

/// The most host memory a guest under `ceilings` can make its host hold through resources:
/// the memory ceiling (a full table of the largest entries), the per-entry overhead, the guest
/// log and what the network may send it (the egress ceiling).
pub fn host_bytes_bound(ceilings: &Ceilings) -> u64 {
    let entries = table_capacity(ceilings) as u64;
    entries * (MAX_ENTRY_BYTES + ENTRY_OVERHEAD_BYTES) + super::MAX_GUEST_LOG_BYTES as u64 + ceilings.egress_bytes
}

/// Whether a guest call failed because the sandbox's resource table was full.
pub(crate) fn is_table_full(e: &wasmtime::Error) -> bool {
    e.chain()
        .any(|c| matches!(c.downcast_ref::<ResourceTableError>(), Some(ResourceTableError::Full)))
        || format!("{e:#}").contains(&ResourceTableError::Full.to_string())
}

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
            32 * 1024 * 1024 + 128 * 1024 + 256 * 1024 + 4 * 1024 * 1024
        );
    }

    #[test]
    fn a_full_table_is_recognised_through_context() {
        let mut table = wasmtime::component::ResourceTable::new();
        table.set_max_capacity(1);
        table.push(1u8).unwrap();
        let err = table.push(2u8).unwrap_err();
        let e = wasmtime::Error::from(err).context("[new_fields] pushing fields");
        assert!(is_table_full(&e));
        assert!(!is_table_full(&wasmtime::format_err!("something else")));
    }
}
