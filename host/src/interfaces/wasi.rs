//! WASI as a sandbox sees it: exactly the interfaces a Rust `wasm32-wasip2` guest's standard
//! library imports, plus outgoing HTTP, plus the filesystem and sockets a Python guest's libc
//! imports (empty and refused), each without authority — and nothing else.
//!
//! wasmtime-wasi's `add_to_linker_sync` links every WASI 0.2 interface, sockets and filesystem
//! included; this module links [`WASI_INTERFACES`] one by one instead. What each can reach is
//! set by the sandbox's `WasiCtx` (`sandbox::state`): no arguments, an empty environment, an
//! empty stdin, stdout and stderr into the sandbox's bounded log, and the real clocks and a
//! random source. `wasi:http` goes through the egress hooks (`crate::egress`): only the hosts
//! of the snapshot's MCP servers, counted against the tier's egress ceiling.
//!
//! Linked for Python guests, without authority: `wasi:filesystem/{types,preopens}` and
//! `wasi:sockets/*`. A componentize-py component imports them all, because CPython's libc
//! does, whether or not the agent ever opens a file or a socket. The sandbox's `WasiCtx`
//! has no preopened directory, so `get-directories` is empty and no descriptor can ever
//! exist; it refuses TCP, UDP and name lookup (`access-denied`) and denies every address, so
//! no socket can ever be created, bound or connected. What is left of those interfaces —
//! `instance-network`'s handle, error codes — reaches nothing and counts against the
//! sandbox's resource table like any handle (`sandbox::host_resources`).
//!
//! Anything else (e.g. `wasi:random/insecure`, `wasi:keyvalue/*`, a package of its own) is not
//! linked, so a component importing it is refused at registration.

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, io, random, sockets};
use wasmtime_wasi::random::{WasiRandom, WasiRandomView};
use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};

use wasmtime::StoreContextMut;
use wasmtime_wasi::WasiView;
use wasmtime_wasi_http::WasiHttpView;

mod fields;

/// The `wasi:http` field-size limit of every sandbox: one `fields` (headers or trailers) may
/// hold this many accounted bytes. wasmtime's default, which any real header set fits.
pub const FIELD_SIZE_LIMIT: usize = 128 * 1024;

/// Longest authority (`host:port`) or method an outgoing request may be given: real ones are
/// at most a few hundred bytes. Each is part of a resource-table entry the host holds for the
/// guest (see `sandbox::host_resources`).
pub const MAX_REQUEST_NAME_BYTES: usize = 16 * 1024;

/// The `wasi:http/types` instance as wasmtime-wasi-http 48 links it (guests importing any
/// `0.2.x` are matched to it).
const HTTP_TYPES: &str = "wasi:http/types@0.2.12";

/// Every WASI interface the host links, without version (any `0.2.x` the linker accepts).
///
/// Measured (`Component::component_type().imports()`, see the test
/// `every_example_guest_imports_only_what_the_host_links`): every example guest — a Rust
/// `wasm32-wasip2` std guest — imports `wasi:cli/*` (environment, exit, the three standard
/// streams, the five terminal interfaces) and `wasi:io/{error,poll,streams}`; the egress guests
/// add `wasi:http/{types,outgoing-handler}`. A std guest that reads `Instant` or `SystemTime`
/// imports `wasi:clocks/{monotonic-clock,wall-clock}`, and one that builds a `HashMap` imports
/// `wasi:random/insecure-seed` (checked on a probe guest); `wasi:random/random` is what the
/// `getrandom` crate uses. None of those four carries authority, so they are linked too.
pub const WASI_INTERFACES: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:random/random",
    "wasi:random/insecure-seed",
    "wasi:http/types",
    "wasi:http/outgoing-handler",
    // A componentize-py (Python) guest's: CPython's libc imports them all. No authority:
    // no preopens, sockets and name lookup refused (see the module doc and the test
    // `python_guest_finds_no_file_and_no_socket`).
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
];

/// The `HasData` of the `wasi:io` interfaces: the sandbox's resource table.
struct Io;

impl HasData for Io {
    type Data<'a> = &'a mut ResourceTable;
}

fn table<T: WasiView>(s: &mut T) -> &mut ResourceTable {
    s.ctx().table
}

/// Links [`WASI_INTERFACES`], and only them, into `linker`.
pub(crate) fn add_to_linker<S: WasiView + WasiHttpView + 'static>(l: &mut Linker<S>) -> wasmtime::Result<()> {
    cli::environment::add_to_linker::<S, WasiCli>(l, S::cli)?;
    cli::exit::add_to_linker::<S, WasiCli>(l, S::cli)?;
    cli::stdin::add_to_linker::<S, WasiCli>(l, S::cli)?;
    cli::stdout::add_to_linker::<S, WasiCli>(l, S::cli)?;
    cli::stderr::add_to_linker::<S, WasiCli>(l, S::cli)?;
    cli::terminal_input::add_to_linker::<S, WasiCli>(l, S::cli)?;
    cli::terminal_output::add_to_linker::<S, WasiCli>(l, S::cli)?;
    cli::terminal_stdin::add_to_linker::<S, WasiCli>(l, S::cli)?;
    cli::terminal_stdout::add_to_linker::<S, WasiCli>(l, S::cli)?;
    cli::terminal_stderr::add_to_linker::<S, WasiCli>(l, S::cli)?;
    // The async `wasi:io`: a guest blocked in `poll` or on a stream waits in a future, which
    // the turn's wall-clock timeout drops (see `sandbox`), instead of blocking a host thread.
    io::error::add_to_linker::<S, Io>(l, table::<S>)?;
    io::poll::add_to_linker::<S, Io>(l, table::<S>)?;
    io::streams::add_to_linker::<S, Io>(l, table::<S>)?;
    clocks::monotonic_clock::add_to_linker::<S, WasiClocks>(l, S::clocks)?;
    clocks::wall_clock::add_to_linker::<S, WasiClocks>(l, S::clocks)?;
    random::random::add_to_linker::<S, WasiRandom>(l, S::random)?;
    random::insecure_seed::add_to_linker::<S, WasiRandom>(l, S::random)?;
    // A Python guest's filesystem and sockets: no preopens, every socket refused (the
    // sandbox's `WasiCtx`), so they answer but reach nothing.
    filesystem::types::add_to_linker::<S, WasiFilesystem>(l, S::filesystem)?;
    filesystem::preopens::add_to_linker::<S, WasiFilesystem>(l, S::filesystem)?;
    sockets::network::add_to_linker::<S, WasiSockets>(l, &Default::default(), S::sockets)?;
    sockets::instance_network::add_to_linker::<S, WasiSockets>(l, S::sockets)?;
    sockets::tcp::add_to_linker::<S, WasiSockets>(l, S::sockets)?;
    sockets::tcp_create_socket::add_to_linker::<S, WasiSockets>(l, S::sockets)?;
    sockets::udp::add_to_linker::<S, WasiSockets>(l, S::sockets)?;
    sockets::udp_create_socket::add_to_linker::<S, WasiSockets>(l, S::sockets)?;
    sockets::ip_name_lookup::add_to_linker::<S, WasiSockets>(l, S::sockets)?;
    // `wasi:http/types` and `wasi:http/outgoing-handler`, through the egress hooks (async, like
    // `wasi:io`: every wait on the network is a future the turn's timeout can drop).
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(l)?;
    bound_request_names(l)?;
    bound_fields(l)?;
    Ok(())
}

/// Replaces `outgoing-request.set-authority` and `set-method` with versions that refuse (the
/// WIT `err`, as for an invalid value) an authority or method longer than
/// [`MAX_REQUEST_NAME_BYTES`]: wasmtime-wasi-http keeps any length, and a request is a
/// resource-table entry the host holds for the guest (see `sandbox::host_resources`).
fn bound_request_names<S: WasiHttpView + 'static>(l: &mut Linker<S>) -> wasmtime::Result<()> {
    use wasmtime::component::Resource;
    use wasmtime_wasi_http::p2::bindings::http::types::{HostOutgoingRequest as _, Method};
    use wasmtime_wasi_http::p2::types::HostOutgoingRequest;

    type Request = Resource<HostOutgoingRequest>;
    let fits = |s: &str| s.len() <= MAX_REQUEST_NAME_BYTES;
    l.allow_shadowing(true);
    let mut types = l.instance(HTTP_TYPES)?;
    types.func_wrap(
        "[method]outgoing-request.set-authority",
        move |mut cx: StoreContextMut<'_, S>, (req, authority): (Request, Option<String>)| {
            if !authority.as_deref().is_none_or(fits) {
                return Ok((Err(()),));
            }
            Ok((cx.data_mut().http().set_authority(req, authority)?,))
        },
    )?;
    types.func_wrap(
        "[method]outgoing-request.set-method",
        move |mut cx: StoreContextMut<'_, S>, (req, method): (Request, Method)| {
            if let Method::Other(m) = &method
                && !fits(m)
            {
                return Ok((Err(()),));
            }
            Ok((cx.data_mut().http().set_method(req, method)?,))
        },
    )?;
    l.allow_shadowing(false);
    Ok(())
}

/// Replaces `[static]fields.from-list`, `[method]fields.set` and `[method]fields.append` with
/// versions that weigh their entries in the guest's memory before copying them (see
/// `interfaces::bounded`): every entry is counted as wasmtime counts a new one (its name and
/// value plus their `HeaderName` and `HeaderValue` structs), and a call whose entries alone
/// exceed the field-size limit ([`FIELD_SIZE_LIMIT`]) is refused with `header-error.forbidden`
/// before anything is copied. wasmtime-wasi-http then applies its own limit to the fields as a
/// whole, and a call that would take them past it is refused the same way instead of trapping.
fn bound_fields<S: WasiHttpView + 'static>(l: &mut Linker<S>) -> wasmtime::Result<()> {
    use wasmtime::component::{Resource, WasmList, WasmStr};
    use wasmtime_wasi_http::FieldMap;
    use wasmtime_wasi_http::p2::bindings::http::types::{HeaderError, HostFields as _};

    type Fields = Resource<FieldMap>;
    l.allow_shadowing(true);
    let mut types = l.instance(HTTP_TYPES)?;
    types.func_wrap(
        "[static]fields.from-list",
        |mut cx: StoreContextMut<'_, S>,
         (entries,): (WasmList<(WasmStr, WasmList<u8>)>,)|
         -> wasmtime::Result<(Result<Fields, HeaderError>,)> {
            let Some(entries) = fields::entries(&mut cx, &entries)? else {
                return Ok((Err(HeaderError::Forbidden),));
            };
            let mut http = cx.data_mut().http();
            let made = http.from_list(entries);
            Ok((fields::outcome(&mut http, made)?,))
        },
    )?;
    types.func_wrap(
        "[method]fields.set",
        |mut cx: StoreContextMut<'_, S>,
         (fields, name, values): (Fields, WasmStr, WasmList<WasmList<u8>>)|
         -> wasmtime::Result<(Result<(), HeaderError>,)> {
            let Some((name, values)) = fields::values(&mut cx, &name, &values)? else {
                return Ok((Err(HeaderError::Forbidden),));
            };
            let mut http = cx.data_mut().http();
            let set = http.set(fields, name, values);
            Ok((fields::outcome(&mut http, set)?,))
        },
    )?;
    types.func_wrap(
        "[method]fields.append",
        |mut cx: StoreContextMut<'_, S>,
         (fields, name, value): (Fields, WasmStr, WasmList<u8>)|
         -> wasmtime::Result<(Result<(), HeaderError>,)> {
            let Some((name, value)) = fields::value(&mut cx, &name, &value)? else {
                return Ok((Err(HeaderError::Forbidden),));
            };
            let mut http = cx.data_mut().http();
            let appended = http.append(fields, name, value);
            Ok((fields::outcome(&mut http, appended)?,))
        },
    )?;
    l.allow_shadowing(false);
    Ok(())
}
