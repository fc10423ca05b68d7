//! Host implementations of the `ahp:agent` WIT interfaces, one file per interface, and the WASI
//! the host links beside them ([`wasi`]).
//!
//! Each file only *adapts*: it converts WIT types, applies the per-call bounds, calls the real
//! logic (the store, the vault, the meter) and maps its errors to the interface's `error`
//! variant. An ordinary guest mistake is a WIT error; a broken ceiling is a trap. The adapters
//! see a sandbox only through its [`AgentCtx`] ([`context`]), the way wasmtime-wasi's
//! interfaces see a `WasiCtxView`; the sandbox implements [`AgentView`] and [`Metered`].
//!
//! Every version of the contract is linked: `@0.3.0` ([`bindings::v0_3`]) and the frozen
//! `@0.2.0` and `@0.1.0` (`v0_2`, `v0_1`, forwarding to the same code), so a component built
//! for any of them runs.
//!
//! What a guest may import is one allow-list, [`AHP_INTERFACES`] and
//! [`wasi::WASI_INTERFACES`]; a component importing anything else is refused at registration
//! by [`check_imports`], which names the import.

pub mod bindings;
pub mod bounded;
pub mod checkpoint;
pub mod context;
pub mod conversations;
pub mod credentials;
pub mod delegation;
mod delegation_lists;
mod delegation_types;
mod frozen;
pub mod journal;
pub mod metering;
pub mod model;
mod model_request;
pub mod snapshot;
pub mod tools;
mod v0_1;
mod v0_2;
pub mod wasi;

use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime_wasi::WasiView;
use wasmtime_wasi_http::WasiHttpView;

pub use self::context::{AgentCtx, AgentView, Metered, TurnCalls, TurnCtx};
pub use self::journal::Journal;

/// The `ahp:agent` interfaces the host links (the imports of world `agent`).
pub const AHP_INTERFACES: &[&str] = &[
    "ahp:agent/snapshot",
    "ahp:agent/credentials",
    "ahp:agent/metering",
    "ahp:agent/checkpoint",
    "ahp:agent/conversations",
    "ahp:agent/model",
    "ahp:agent/tools",
    "ahp:agent/delegation",
];

/// Whether the host links the interface a component imports as `name` (e.g.
/// `wasi:io/streams@0.2.6`): its name without the version is on the allow-list.
pub fn is_allowed(name: &str) -> bool {
    let unversioned = name.split_once('@').map_or(name, |(n, _)| n);
    AHP_INTERFACES
        .iter()
        .chain(wasi::WASI_INTERFACES)
        .any(|&a| a == unversioned)
}

/// A component import outside the allow-list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "imports `{0}`, which this host does not provide: a guest may import only the ahp:agent interfaces and the WASI listed in world `agent` (cli, io, clocks, random, http, and filesystem and sockets without authority)"
)]
pub struct RefusedImport(pub String);

/// Checks that every import of `component` is on the allow-list.
///
/// # Errors
///
/// [`RefusedImport`] naming the first import that is not.
pub fn check_imports(engine: &Engine, component: &Component) -> Result<(), RefusedImport> {
    match component
        .component_type()
        .imports(engine)
        .find(|(name, _)| !is_allowed(name))
    {
        Some((name, _)) => Err(RefusedImport(name.to_owned())),
        None => Ok(()),
    }
}

/// Adds the `ahp:agent` interfaces of every version and the allowed WASI ([`wasi`]; no ambient
/// authority, see `sandbox::state`) to `linker`.
pub(crate) fn add_to_linker<T>(linker: &mut Linker<T>) -> wasmtime::Result<()>
where
    T: Metered + WasiView + WasiHttpView,
{
    use bindings::{v0_1::ahp::agent as old, v0_2::ahp::agent as v2, v0_3::ahp::agent as new};
    wasi::add_to_linker(linker)?;
    new::snapshot::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    new::credentials::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    new::checkpoint::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    new::conversations::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    model::add_to_linker(linker)?;
    tools::add_to_linker(linker)?;
    new::delegation::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    delegation_lists::add_to_linker(linker)?;
    v2::snapshot::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    v2::credentials::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    v2::checkpoint::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    v2::conversations::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    old::snapshot::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    old::credentials::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    old::checkpoint::add_to_linker::<T, HasSelf<AgentCtx>>(linker, ctx::<T>)?;
    metering::add_to_linker(linker)?;
    Ok(())
}

fn ctx<T: AgentView>(t: &mut T) -> &mut AgentCtx {
    t.agent()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::Config;

    /// Whether a component importing `name` as an instance with `exports` (the WAT of an
    /// instance type's body) links. A missing instance whose type needs nothing would link, so
    /// each probe needs a resource or function the real interface has.
    fn links(linker: &Linker<crate::sandbox::state::SandboxState>, name: &str, exports: &str) -> bool {
        let wat = format!(r#"(component (import "{name}@0.2.6" (instance {exports})))"#);
        let component = Component::new(linker.engine(), wat).unwrap();
        linker.instantiate_pre(&component).is_ok()
    }

    /// The filesystem and sockets a Python guest imports are linked, as the allow-list says;
    /// what they can reach (nothing) is the sandbox's `WasiCtx` (`sandbox::state`), proven by
    /// the Python prober (`host/tests/python.rs`).
    #[test]
    fn the_linker_links_exactly_the_allow_list() {
        let mut config = Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).unwrap();
        let mut linker = Linker::new(&engine);
        add_to_linker(&mut linker).unwrap();
        let resource = |r: &str| format!(r#"(export "{r}" (type (sub resource)))"#);
        // The probes work: these are linked.
        assert!(links(&linker, "wasi:io/streams", &resource("input-stream")));
        assert!(links(&linker, "wasi:http/types", &resource("outgoing-request")));
        assert!(links(
            &linker,
            "wasi:random/insecure-seed",
            r#"(export "insecure-seed" (func (result (tuple u64 u64))))"#
        ));
        assert!(links(
            &linker,
            "wasi:cli/environment",
            r#"(export "get-arguments" (func (result (list string))))"#
        ));
        for (name, exports) in [
            ("wasi:sockets/network", resource("network")),
            ("wasi:sockets/tcp", resource("tcp-socket")),
            ("wasi:sockets/udp", resource("udp-socket")),
            ("wasi:sockets/ip-name-lookup", resource("resolve-address-stream")),
            ("wasi:filesystem/types", resource("descriptor")),
        ] {
            assert!(links(&linker, name, &exports), "{name} is not linked");
            assert!(is_allowed(name), "{name} is not allowed");
        }
        // These are not.
        for (name, exports) in [
            (
                "wasi:random/insecure",
                r#"(export "get-insecure-random-u64" (func (result u64)))"#.to_owned(),
            ),
            ("wasi:keyvalue/store", resource("bucket")),
        ] {
            assert!(!links(&linker, name, &exports), "{name} is linked");
            assert!(!is_allowed(name), "{name} is allowed");
        }
    }

    #[test]
    fn allow_list_matches_names_without_their_version() {
        assert!(is_allowed("wasi:io/streams@0.2.6"));
        assert!(is_allowed("ahp:agent/snapshot@0.1.0"));
        assert!(is_allowed("wasi:http/outgoing-handler@0.2.12"));
        assert!(is_allowed("wasi:sockets/tcp-create-socket@0.2.0"));
        assert!(is_allowed("wasi:filesystem/preopens@0.2.6"));
        assert!(!is_allowed("wasi:random/insecure@0.2.6"));
        assert!(!is_allowed("wasi:keyvalue/store@0.2.0-draft"));
        assert!(!is_allowed("wasi:io"), "a package is not an interface");
        assert!(!is_allowed("resume"));
    }
}
