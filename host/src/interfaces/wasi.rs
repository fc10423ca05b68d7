//! WASI as a sandbox sees it: exactly the interfaces a Rust `wasm32-wasip2` guest's standard
//! library imports, plus outgoing HTTP, each without authority — and nothing else.
//!
//! wasmtime-wasi's `add_to_linker_sync` links every WASI 0.2 interface, sockets and filesystem
//! included; this module links [`WASI_INTERFACES`] one by one instead. What each can reach is
//! set by the sandbox's `WasiCtx` (`sandbox::state`): no arguments, an empty environment, an
//! empty stdin, stdout and stderr into the sandbox's bounded log, and the real clocks and a
//! random source. `wasi:http` goes through the egress hooks (`sandbox::egress`): only the hosts
//! of the snapshot's MCP servers, counted against the tier's egress ceiling.
//!
//! Not linked, so a component importing them is refused at registration: `wasi:sockets/*`
//! (TCP, UDP, name lookup, networks) and `wasi:filesystem/*` (there are no preopened
//! directories, so it would only ever fail).

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::cli::{WasiCli, WasiCliView};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
use wasmtime_wasi::p2::bindings::{cli, clocks, io, random};
use wasmtime_wasi::random::{WasiRandom, WasiRandomView};

use wasmtime::StoreContextMut;
use wasmtime_wasi::WasiView;
use wasmtime_wasi_http::WasiHttpView;

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
    // `wasi:http/types` and `wasi:http/outgoing-handler`, through the egress hooks (async, like
    // `wasi:io`: every wait on the network is a future the turn's timeout can drop).
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(l)?;
    bound_request_names(l)?;
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
