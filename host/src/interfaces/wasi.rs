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
use wasmtime_wasi::p2::bindings::{cli, clocks, random, sync};
use wasmtime_wasi::random::{WasiRandom, WasiRandomView};

use crate::sandbox::state::SandboxState;

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

fn table(s: &mut SandboxState) -> &mut ResourceTable {
    wasmtime_wasi::WasiView::ctx(s).table
}

/// Links [`WASI_INTERFACES`], and only them, into `linker`.
pub(crate) fn add_to_linker(l: &mut Linker<SandboxState>) -> wasmtime::Result<()> {
    type S = SandboxState;
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
    sync::io::error::add_to_linker::<S, Io>(l, table)?;
    sync::io::poll::add_to_linker::<S, Io>(l, table)?;
    sync::io::streams::add_to_linker::<S, Io>(l, table)?;
    clocks::monotonic_clock::add_to_linker::<S, WasiClocks>(l, S::clocks)?;
    clocks::wall_clock::add_to_linker::<S, WasiClocks>(l, S::clocks)?;
    random::random::add_to_linker::<S, WasiRandom>(l, S::random)?;
    random::insecure_seed::add_to_linker::<S, WasiRandom>(l, S::random)?;
    // `wasi:http/types` and `wasi:http/outgoing-handler`, through the egress hooks.
    wasmtime_wasi_http::p2::add_only_http_to_linker_sync(l)?;
    Ok(())
}
