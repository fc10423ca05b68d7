//! `wasi:http` fields weighed in the guest's memory before they are copied (see
//! `interfaces::bounded` and [`super::bound_fields`]).

use std::mem::size_of;

use http::{HeaderName, HeaderValue};
use wasmtime::StoreContextMut;
use wasmtime::component::{WasmList, WasmStr};
use wasmtime_wasi_http::p2::HeaderResult;
use wasmtime_wasi_http::p2::bindings::http::types::{HeaderError, Host as _};
use wasmtime_wasi_http::{FieldMapError, WasiHttpCtxView};

use super::FIELD_SIZE_LIMIT;
use crate::interfaces::bounded::{element, len, string, weighing};

/// Entries of a `fields`, copied: each a name and a value.
type Entries = Vec<(String, Vec<u8>)>;

/// What wasmtime-wasi-http counts for one new entry besides its name's and value's bytes.
const ENTRY_STRUCT_BYTES: usize = size_of::<HeaderName>() + size_of::<HeaderValue>();

/// `from-list`'s entries, copied, or `None` if they alone exceed [`FIELD_SIZE_LIMIT`].
///
/// # Errors
///
/// A malformed descriptor or a name that is not UTF-8 (the trap a typed lift raises).
pub(super) fn entries<T: 'static>(
    cx: &mut StoreContextMut<'_, T>,
    list: &WasmList<(WasmStr, WasmList<u8>)>,
) -> wasmtime::Result<Option<Entries>> {
    if list.len().saturating_mul(ENTRY_STRUCT_BYTES) > FIELD_SIZE_LIMIT {
        return Ok(None);
    }
    let weighed = weighing(cx, |cx| {
        let mut total = 0_usize;
        let mut lazy = Vec::with_capacity(list.len());
        for i in 0..list.len() {
            let (name, value) = element(cx, list, i)?;
            total = total.saturating_add(len(cx, &name)?.saturating_add(value.len()) + ENTRY_STRUCT_BYTES);
            if total > FIELD_SIZE_LIMIT {
                return Ok(None);
            }
            lazy.push((name, value));
        }
        Ok(Some(lazy))
    })?;
    let Some(lazy) = weighed else { return Ok(None) };
    lazy.iter()
        .map(|(name, value)| Ok((string(cx, name)?, bytes(cx, value))))
        .collect::<wasmtime::Result<_>>()
        .map(Some)
}

/// `set`'s name and values, copied, or `None` if they alone exceed [`FIELD_SIZE_LIMIT`].
///
/// # Errors
///
/// A malformed descriptor or a name that is not UTF-8.
pub(super) fn values<T: 'static>(
    cx: &mut StoreContextMut<'_, T>,
    name: &WasmStr,
    values: &WasmList<WasmList<u8>>,
) -> wasmtime::Result<Option<(String, Vec<Vec<u8>>)>> {
    let name_bytes = len(cx, name)?;
    if values
        .len()
        .saturating_mul(ENTRY_STRUCT_BYTES)
        .saturating_add(name_bytes)
        > FIELD_SIZE_LIMIT
    {
        return Ok(None);
    }
    let weighed = weighing(cx, |cx| {
        let mut total = name_bytes;
        let mut lazy = Vec::with_capacity(values.len());
        for i in 0..values.len() {
            let value = element(cx, values, i)?;
            total = total.saturating_add(value.len() + ENTRY_STRUCT_BYTES);
            if total > FIELD_SIZE_LIMIT {
                return Ok(None);
            }
            lazy.push(value);
        }
        Ok(Some(lazy))
    })?;
    let Some(lazy) = weighed else { return Ok(None) };
    let values = lazy.iter().map(|v| bytes(cx, v)).collect();
    Ok(Some((string(cx, name)?, values)))
}

/// `append`'s name and value, copied, or `None` if they alone exceed [`FIELD_SIZE_LIMIT`].
///
/// # Errors
///
/// A name that is not UTF-8.
pub(super) fn value<T: 'static>(
    cx: &mut StoreContextMut<'_, T>,
    name: &WasmStr,
    value: &WasmList<u8>,
) -> wasmtime::Result<Option<(String, Vec<u8>)>> {
    let total = len(cx, name)?.saturating_add(value.len()) + ENTRY_STRUCT_BYTES;
    if total > FIELD_SIZE_LIMIT {
        return Ok(None);
    }
    Ok(Some((string(cx, name)?, bytes(cx, value))))
}

fn bytes<T: 'static>(cx: &StoreContextMut<'_, T>, list: &WasmList<u8>) -> Vec<u8> {
    list.as_le_slice(cx).to_vec()
}

/// What a fields call returns to the guest: wasmtime-wasi-http's own outcome, except that the
/// fields growing past their size limit (which it raises as a trap) is `forbidden`.
///
/// # Errors
///
/// Any other trap.
pub(super) fn outcome<V>(
    http: &mut WasiHttpCtxView<'_>,
    done: HeaderResult<V>,
) -> wasmtime::Result<Result<V, HeaderError>> {
    let Err(e) = done else {
        return Ok(done.map_err(|_| HeaderError::Forbidden));
    };
    match http.convert_header_error(e) {
        Ok(refused) => Ok(Err(refused)),
        Err(trap)
            if matches!(
                trap.downcast_ref::<FieldMapError>(),
                Some(FieldMapError::TotalSizeTooBig | FieldMapError::TooManyFields)
            ) =>
        {
            Ok(Err(HeaderError::Forbidden))
        }
        Err(trap) => Err(trap),
    }
}
