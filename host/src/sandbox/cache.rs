//! Compiled components, cached twice so no activation ever compiles.
//!
//! On disk, under the host's data directory:
//! - `components/<hex>.wasm` — the bytes as registered, named by their SHA-256;
//! - `compiled/<hex>-<engine>.cwasm` — the same component compiled by
//!   `Engine::precompile_component`, where `<engine>` hashes the engine's compatibility
//!   (wasmtime version, target, configuration). A host with a different engine compiles its
//!   own file beside it; a file wasmtime refuses to load is recompiled and replaced.
//! - `compiled/<hex>-<engine>.cwasm.sha256` — the SHA-256 of that file's bytes, written before
//!   it. The file is native code the host runs: it is loaded only when it hashes to its
//!   sidecar (a power loss's zeros or a stray write are compiled again, never run).
//!
//! Every file is written to a temporary name, synced, renamed, and its directory synced.
//!
//! In memory: one `Prepared` per digest — an `AgentPre` (an `InstancePre` with every import
//! already resolved) and the component's [`ComponentCounts`], which the sandbox checks against
//! the tier before instantiating. A component that imports anything outside the host's
//! allow-list ([`crate::interfaces::check_imports`]) is refused here, naming the import. Every
//! compilation increments the cache's compile count ([`super::Sandboxes::compiles`]), so tests
//! can assert that a second activation compiled nothing.

use crate::shared_store::StoreLock;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ahp_store::MAX_COMPONENT_BYTES;
use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use super::Error;
use super::counts::ComponentCounts;
use super::instance::AgentPre;
use super::state::SandboxState;

/// A component ready to instantiate, with what instantiating it creates.
#[derive(Clone)]
pub(crate) struct Prepared {
    pub(crate) pre: AgentPre,
    pub(crate) counts: ComponentCounts,
}

/// The compile cache of one host.
pub(crate) struct ComponentCache {
    engine: Engine,
    linker: Arc<Linker<SandboxState>>,
    components_dir: PathBuf,
    compiled_dir: PathBuf,
    engine_tag: String,
    pres: Mutex<HashMap<String, Prepared>>,
    compiles: AtomicU64,
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bytes` to `path` atomically: a reader sees the old file, the new one, or none, and
/// so does the host after a crash or a power loss — the bytes go to a temporary file, synced,
/// renamed over `path`, then the directory is synced (a rename not yet on disk can leave a
/// file of zeros under the new name). The temporary name is unique per process and call, so
/// concurrent writers never share one.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write as _;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    let mut file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io(path))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

/// The SHA-256 of a compiled artifact, as its sidecar file holds it.
fn artifact_digest(artifact: &[u8]) -> String {
    hex::encode(Sha256::digest(artifact))
}

impl ComponentCache {
    pub(crate) fn open(engine: Engine, linker: Arc<Linker<SandboxState>>, data_dir: &Path) -> Result<Self, Error> {
        let components_dir = data_dir.join("components");
        let compiled_dir = data_dir.join("compiled");
        for d in [&components_dir, &compiled_dir] {
            std::fs::create_dir_all(d).map_err(io(d))?;
        }
        let mut h = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        Ok(Self {
            engine,
            linker,
            components_dir,
            compiled_dir,
            engine_tag: format!("{:016x}", h.finish()),
            pres: Mutex::new(HashMap::new()),
            compiles: AtomicU64::new(0),
        })
    }

    /// How many components this cache has compiled since it was opened.
    pub(crate) fn compiles(&self) -> u64 {
        self.compiles.load(Ordering::Relaxed)
    }

    /// Stores `bytes` under their digest, compiles them (validating that they are a component
    /// this host can link) and returns the digest. Refused bytes leave no file behind.
    pub(crate) fn add(&self, bytes: &[u8]) -> Result<String, Error> {
        if bytes.is_empty() || bytes.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(Error::InvalidComponent(format!(
                "a component must be 1 to {MAX_COMPONENT_BYTES} bytes; this one is {}",
                bytes.len()
            )));
        }
        let digest = digest_of(bytes);
        let path = self.wasm_path(&digest);
        let new = !path.is_file();
        if new {
            write_atomic(&path, bytes)?;
        }
        if let Err(e) = self.prepared(&digest) {
            // Refused: leave the data directory as it was.
            if new {
                let compiled = self.compiled_path(&digest);
                for p in [path, Self::sidecar_path(&compiled), compiled] {
                    let _ = std::fs::remove_file(p);
                }
            }
            return Err(e);
        }
        Ok(digest)
    }

    /// The ready-to-instantiate form of the component `digest`: from memory, else from the
    /// compiled file, else compiled now (counted).
    pub(crate) fn prepared(&self, digest: &str) -> Result<Prepared, Error> {
        if let Some(pre) = self.pres.locked().get(digest) {
            return Ok(pre.clone());
        }
        let (component, wasm) = self.load(digest)?;
        crate::interfaces::check_imports(&self.engine, &component)
            .map_err(|e| Error::InvalidComponent(format!("{digest} {e}")))?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .and_then(AgentPre::new)
            .map_err(|e| Error::InvalidComponent(format!("{digest} cannot run here: {e:#}")))?;
        let counts =
            ComponentCounts::of(&component, &wasm).map_err(|e| Error::InvalidComponent(format!("{digest} {e}")))?;
        let prepared = Prepared { pre, counts };
        self.pres.locked().insert(digest.to_owned(), prepared.clone());
        Ok(prepared)
    }

    /// Drops every in-memory `InstancePre` (the on-disk cache stays): for tests and benches
    /// that measure the cold path.
    pub(crate) fn forget_in_memory(&self) {
        self.pres.locked().clear();
    }

    fn hex(digest: &str) -> &str {
        digest.strip_prefix("sha256:").unwrap_or(digest)
    }

    fn wasm_path(&self, digest: &str) -> PathBuf {
        self.components_dir.join(format!("{}.wasm", Self::hex(digest)))
    }

    fn compiled_path(&self, digest: &str) -> PathBuf {
        self.compiled_dir
            .join(format!("{}-{}.cwasm", Self::hex(digest), self.engine_tag))
    }

    /// The sidecar of a compiled file: the SHA-256 of its bytes, written before it.
    fn sidecar_path(compiled: &Path) -> PathBuf {
        compiled.with_extension("cwasm.sha256")
    }

    /// The bytes of the compiled file at `compiled`, if they hash to what its sidecar recorded
    /// when this host wrote it; else why not.
    fn verified_artifact(compiled: &Path) -> Result<Vec<u8>, String> {
        let recorded =
            std::fs::read_to_string(Self::sidecar_path(compiled)).map_err(|e| format!("no digest beside it: {e}"))?;
        let artifact = std::fs::read(compiled).map_err(|e| e.to_string())?;
        let actual = artifact_digest(&artifact);
        if actual != recorded.trim() {
            return Err(format!(
                "its bytes hash to {actual}, not to the recorded {}",
                recorded.trim()
            ));
        }
        Ok(artifact)
    }

    /// The component `digest`, from its compiled file or compiled now, and its bytes as
    /// registered. A compiled file is native code: it is loaded only when its bytes hash to the
    /// digest recorded beside it, else compiled again and replaced.
    fn load(&self, digest: &str) -> Result<(Component, Vec<u8>), Error> {
        let bytes = self.registered_bytes(digest)?;
        let compiled = self.compiled_path(digest);
        if compiled.is_file() {
            match Self::verified_artifact(&compiled) {
                // SAFETY: the bytes are those this host wrote with `Engine::precompile_component`
                // into its own data directory (never a guest- or network-supplied file), checked
                // against the digest it recorded beside them, which is what `deserialize`
                // requires; wasmtime still checks the engine compatibility.
                #[allow(unsafe_code)]
                Ok(artifact) => match unsafe { Component::deserialize(&self.engine, &artifact) } {
                    Ok(c) => return Ok((c, bytes)),
                    Err(e) => {
                        tracing::warn!(path = %compiled.display(), error = %e, "recompiling a stale compiled component")
                    }
                },
                Err(why) => {
                    tracing::warn!(path = %compiled.display(), %why, "recompiling a compiled component that fails its check")
                }
            }
        }
        let started = std::time::Instant::now();
        let artifact = self
            .engine
            .precompile_component(&bytes)
            .map_err(|e| Error::InvalidComponent(format!("{digest} does not compile: {e:#}")))?;
        self.compiles.fetch_add(1, Ordering::Relaxed);
        tracing::info!(%digest, elapsed = ?started.elapsed(), "compiled component");
        write_atomic(&Self::sidecar_path(&compiled), artifact_digest(&artifact).as_bytes())?;
        write_atomic(&compiled, &artifact)?;
        // SAFETY: `artifact` was produced by `precompile_component` of this very engine.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize(&self.engine, &artifact) };
        Ok((component.map_err(|e| Error::Wasmtime(format!("{e:#}")))?, bytes))
    }

    /// The bytes registered as `digest`, checked against it.
    fn registered_bytes(&self, digest: &str) -> Result<Vec<u8>, Error> {
        let wasm_path = self.wasm_path(digest);
        let bytes = std::fs::read(&wasm_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::UnknownComponent(digest.to_owned()),
            _ => Error::Io {
                path: wasm_path.clone(),
                source: e,
            },
        })?;
        if digest_of(&bytes) != digest {
            return Err(Error::InvalidComponent(format!(
                "{} does not hash to its name",
                wasm_path.display()
            )));
        }
        Ok(bytes)
    }
}
