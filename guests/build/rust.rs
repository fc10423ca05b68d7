//! Builds Rust guests into WebAssembly components: shared by `guests/build.rs` (every guest,
//! for the tests) and `host/build.rs` (the one guest `ahp demo` embeds).
//!
//! The pattern of wasmtime's `crates/test-programs/artifacts/build.rs`: the guests are ordinary
//! crates in their own workspaces, built by a child `cargo build --release --target
//! wasm32-wasip2` into a separate target directory (so the child never waits on the lock the
//! parent cargo holds), with the parent's compiler flags removed from the child's environment.
//! A missing `wasm32-wasip2` target is added through rustup; without rustup the build stops
//! with the one command to run.
//!
//! The guest target directory is keyed by checkout: `<target>/guests/<dir>-<hash of the
//! checkout's path>`, so two checkouts sharing one `CARGO_TARGET_DIR` never overwrite each
//! other's components (`AHP_GUEST_TARGET_DIR` overrides it).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target the guests are built for.
pub(crate) const TARGET: &str = "wasm32-wasip2";

/// The guest target directory of the checkout at `root`: `AHP_GUEST_TARGET_DIR`, else
/// `<target>/guests/<root's name>-<hash of root's path>` beside the build's `OUT_DIR`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    println!("cargo:rerun-if-env-changed=AHP_GUEST_TARGET_DIR");
    if let Some(dir) = env::var_os("AHP_GUEST_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    // OUT_DIR is <target>/<profile>/build/<crate>-<hash>/out.
    let target = out_dir.ancestors().nth(4).expect("OUT_DIR is inside the target dir");
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let name = root
        .file_name()
        .map_or_else(|| "root".into(), |n| n.to_string_lossy().into_owned());
    target
        .join("guests")
        .join(format!("{name}-{:016x}", fnv1a(root.as_os_str().as_encoded_bytes())))
}

/// FNV-1a over `bytes`: a hash stable across toolchains (std's `DefaultHasher` is not), so a
/// checkout keeps its guest directory when the compiler changes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The guests of the workspace at `workspace`: its members that build a `cdylib` (a component).
pub(crate) fn guest_names(workspace: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace.join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("read {}/Cargo.toml: {e}", workspace.display()));
    let members = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .unwrap_or_else(|| panic!("{}/Cargo.toml lists its members", workspace.display()));
    members
        .split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .filter(|m| {
            std::fs::read_to_string(workspace.join(m).join("Cargo.toml")).is_ok_and(|t| t.contains("\"cdylib\""))
        })
        .collect()
}

/// Where `build` writes the component of the guest `name`.
pub(crate) fn component_path(target_dir: &Path, name: &str) -> PathBuf {
    target_dir
        .join(TARGET)
        .join("release")
        .join(format!("{}.wasm", name.replace('-', "_")))
}

/// Makes sure the toolchain has the wasm32-wasip2 standard library.
pub(crate) fn ensure_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = |s: &Option<PathBuf>| s.as_ref().is_some_and(|s| s.join("lib/rustlib").join(TARGET).is_dir());
    if installed(&sysroot) {
        return;
    }
    let added = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .is_ok_and(|s| s.success());
    if !added || !installed(&sysroot) {
        panic!(
            "the guest agents need the {TARGET} target, which this toolchain lacks.\n\
             Run:  rustup target add {TARGET}"
        );
    }
}

/// Builds `packages` of the guest workspace whose manifest is `manifest` (all of its members
/// when `packages` is empty) into `target_dir`.
pub(crate) fn build(manifest: &Path, target_dir: &Path, packages: &[&str]) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--target", TARGET, "--manifest-path"])
        .arg(manifest)
        .arg("--target-dir")
        .arg(target_dir);
    for package in packages {
        cmd.args(["--package", package]);
    }
    // The parent's flags (coverage, sanitizers, clippy's wrapper) are for the host, not guests.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("run cargo for the guests");
    assert!(
        status.success(),
        "building the guest agents failed (see the output above)"
    );
}
