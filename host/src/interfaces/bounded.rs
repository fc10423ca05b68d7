//! Guest arguments weighed in the guest's memory before the host copies them.
//!
//! wasmtime lifts a typed host-function parameter eagerly, before the function runs, and the
//! canonical ABI lets any number of `(pointer, length)` descriptors point at the same bytes: a
//! list of N strings that all alias one L-byte string costs the guest 8·N + L bytes of its own
//! memory and would cost the host N·L. (A `nano` guest once made its host copy 112 MiB in one
//! `register-wait` before the bound refused it.) So every import whose parameters hold a *list*
//! of strings or of lists is linked with wasmtime's lazy [`WasmList`] and [`WasmStr`], which
//! hold descriptors only: its counts and summed lengths are checked against the interface's
//! documented bound as it is read, the call is refused with its typed error at the first one
//! past, and only what fits is copied. They are:
//!
//! | import | bound checked before the copy |
//! |---|---|
//! | `ahp:agent/model` `estimate`, `complete` | `request`: the gateway's [`Weight`](crate::gateway::Weight) (1,024 messages, 4,096 parts, 128 tools, 4 MiB of text in all), a 64-byte model id and tool-choice name — `too-large` (`interfaces::model_request`) |
//! | `ahp:agent/delegation` `register-wait` | 1..8 sources of at most [`MAX_ID_BYTES`] — `invalid` |
//! | `ahp:agent/delegation` `create-goal` | 200-byte title, 4 KiB intent, 32 steps of 200-byte titles, an id — `invalid` |
//! | `ahp:agent/delegation` `checkpoint-goal` | an id, 32 steps of 200-byte titles, a 4 KiB note — `invalid` |
//! | `wasi:http/types` `[static]fields.from-list`, `[method]fields.set`, `[method]fields.append` | the field-size limit (128 KiB, counted as wasmtime counts it) — `forbidden` (`super::wasi`) |
//!
//! Every other import of every linked version (`@0.1.0`, `@0.2.0`, `@0.3.0`, WASI 0.2) takes a
//! fixed number of strings and byte lists (at most four: `delegation.create-task`'s
//! `new-task`), or lists of scalars or handles (`wasi:io/poll.poll`) — but for
//! `wasi:sockets/udp`'s `outgoing-datagram-stream.send`, which no guest can reach (the sandbox
//! creates no socket); what those may copy in one call is bounded by wasmtime's
//! per-call copy budget, which the sandbox sets from the tier
//! ([`hostcall_copy_bytes`](crate::sandbox::host_resources::hostcall_copy_bytes)). A call past
//! that budget traps, and the turn ends with `ceiling_exceeded` naming `host_resources`.
//!
//! While a list is weighed the copy budget is lifted (`weighing`): lifting a lazy element
//! charges its strings' lengths to the budget without copying them, and the bound being checked
//! is far below it. Reading a [`WasmStr`]'s length validates its UTF-8 in place (no copy); the
//! walk stops at the first string past its bound, so a call scans at most the bound plus one
//! string (itself at most the guest's memory).

use wasmtime::StoreContextMut;
use wasmtime::component::{Lift, WasmList, WasmStr};

/// Longest id the host reads from a guest where it expects one of the store's ids (`tsk_…`,
/// `goal_…`, `agt_…`): well-formed ids are a short prefix and 24 hex digits, far shorter.
pub const MAX_ID_BYTES: usize = 64;

/// Runs `walk` with wasmtime's per-call copy budget lifted, and restores it after: `walk` only
/// reads lazy values, which copy nothing, and checks its own bound.
pub(crate) fn weighing<T, R>(
    cx: &mut StoreContextMut<'_, T>,
    walk: impl FnOnce(&mut StoreContextMut<'_, T>) -> wasmtime::Result<R>,
) -> wasmtime::Result<R> {
    let budget = cx.hostcall_fuel();
    cx.set_hostcall_fuel(usize::MAX);
    let walked = walk(cx);
    cx.set_hostcall_fuel(budget);
    walked
}

/// Element `index` of `list`, lifted lazily (its strings and lists stay descriptors).
///
/// # Errors
///
/// The element is malformed (an out-of-bounds descriptor, a bad discriminant): the trap a
/// typed lift would have raised.
pub(crate) fn element<T, E: Lift + 'static>(
    cx: &mut StoreContextMut<'_, T>,
    list: &WasmList<E>,
    index: usize,
) -> wasmtime::Result<E> {
    list.get(&mut *cx, index)
        .unwrap_or_else(|| Err(wasmtime::format_err!("list element {index} is out of range")))
}

/// The length in bytes of `s`, read in place (its UTF-8 validated, nothing copied for a UTF-8
/// guest).
///
/// # Errors
///
/// `s` is not valid text: the trap a typed lift would have raised.
pub(crate) fn len<T: 'static>(cx: &StoreContextMut<'_, T>, s: &WasmStr) -> wasmtime::Result<usize> {
    Ok(s.to_str(cx)?.len())
}

/// A copy of `s`, to be called only once its length was checked.
///
/// # Errors
///
/// `s` is not valid text.
pub(crate) fn string<T: 'static>(cx: &StoreContextMut<'_, T>, s: &WasmStr) -> wasmtime::Result<String> {
    Ok(s.to_str(cx)?.into_owned())
}

/// A copy of every string of `list`, or `Ok(Err(index))` naming the first longer than
/// `max_each` bytes. The caller checked `list.len()`.
///
/// # Errors
///
/// A malformed element or a string that is not valid text.
pub(crate) fn strings<T: 'static>(
    cx: &mut StoreContextMut<'_, T>,
    list: &WasmList<WasmStr>,
    max_each: usize,
) -> wasmtime::Result<Result<Vec<String>, usize>> {
    let checked = weighing(cx, |cx| {
        let mut lazy = Vec::with_capacity(list.len());
        for i in 0..list.len() {
            let s = element(cx, list, i)?;
            if len(cx, &s)? > max_each {
                return Ok(Err(i));
            }
            lazy.push(s);
        }
        Ok(Ok(lazy))
    })?;
    match checked {
        Ok(lazy) => lazy
            .iter()
            .map(|s| string(cx, s))
            .collect::<wasmtime::Result<_>>()
            .map(Ok),
        Err(i) => Ok(Err(i)),
    }
}

/// A copy of `s` if it is at most `max` bytes, else `None`.
///
/// # Errors
///
/// `s` is not valid text.
pub(crate) fn string_within<T: 'static>(
    cx: &StoreContextMut<'_, T>,
    s: &WasmStr,
    max: usize,
) -> wasmtime::Result<Option<String>> {
    if len(cx, s)? > max {
        return Ok(None);
    }
    string(cx, s).map(Some)
}
