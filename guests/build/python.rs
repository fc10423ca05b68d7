//! Builds the Python guests: each directory under `examples/` or `host/tests/guests/` that
//! holds an `app.py` is one (named after its directory), and so is each Python template under
//! `templates/` (named `template-<dir>`, so CI proves the template `ahp agent new` writes
//! builds and answers); each is built with componentize-py against `wit/agent.wit` (world
//! `agent`) with the SDK (`guest-sdk-python/`) on its path, into
//! `<guest target dir>/python/<name>.wasm`.
//!
//! componentize-py is the version pinned in `guest-sdk-python/build-requirements.txt`: the
//! one named by `AHP_COMPONENTIZE_PY` or on `PATH` when it is that version, else one this
//! build installs from PyPI into a virtual environment of its own under the guest target
//! directory (its wheel carries CPython and the standard library, so the builds themselves
//! download nothing). Without Python 3 or PyPI there are no Python guests: [`build`] says why,
//! and the Python tests skip with that line (or fail where `AHP_REQUIRE_PYTHON` is set). A
//! guest is rebuilt only when it, the SDK or the WIT changed since its component was written
//! (a build takes ~10 s of CPU), and the guests are built in parallel.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::SystemTime;

/// The directories to scan, relative to the repository root, and the prefix of their guests'
/// names.
const ROOTS: &[(&str, &str)] = &[("examples", ""), ("host/tests/guests", ""), ("templates", "template-")];

/// One Python guest: its directory name (`python-assistant`) and its component's path.
pub(crate) struct Guest {
    pub(crate) name: String,
    pub(crate) wasm: PathBuf,
}

/// What the Python guests' build made.
pub(crate) struct Built {
    /// Every Python guest, with where its component is (when `tool` is `Ok`) or would be.
    pub(crate) guests: Vec<Guest>,
    /// The componentize-py that built them, or why none could.
    pub(crate) tool: Result<PathBuf, String>,
}

/// Builds every Python guest under the repository `root` into `target_dir/python`.
pub(crate) fn build(root: &Path, target_dir: &Path) -> Built {
    let sdk = root.join("guest-sdk-python");
    let wit = root.join("wit/agent.wit");
    println!("cargo:rerun-if-changed={}", sdk.display());
    println!("cargo:rerun-if-changed={}", root.join("host/tests/guests").display());
    println!("cargo:rerun-if-changed={}", root.join("templates").display());
    println!("cargo:rerun-if-env-changed=AHP_COMPONENTIZE_PY");
    let mut dirs: Vec<(String, PathBuf)> = ROOTS
        .iter()
        .filter_map(|(r, prefix)| std::fs::read_dir(root.join(r)).ok().map(|d| (prefix, d)))
        .flat_map(|(prefix, d)| d.filter_map(|e| e.ok().map(|e| (*prefix, e.path()))))
        .filter(|(_, d)| d.join("app.py").is_file())
        .map(|(prefix, d)| (format!("{prefix}{}", d.file_name().unwrap().to_string_lossy()), d))
        .collect();
    dirs.sort();
    let out = target_dir.join("python");
    std::fs::create_dir_all(&out).expect("create the Python guests' target dir");
    let inputs = newest(&[sdk.as_path(), wit.as_path()]);
    let guests: Vec<(Guest, PathBuf)> = dirs
        .into_iter()
        .map(|(name, dir)| {
            let wasm = out.join(format!("{}.wasm", name.replace('-', "_")));
            (Guest { name, wasm }, dir)
        })
        .collect();
    let stale: Vec<&(Guest, PathBuf)> = guests
        .iter()
        .filter(|(g, dir)| {
            let built = std::fs::metadata(&g.wasm).and_then(|m| m.modified()).ok();
            built.is_none_or(|b| b < inputs.max(newest(&[dir.as_path()])))
        })
        .collect();
    let tool = match componentize_py(&sdk, target_dir) {
        Ok(tool) => tool,
        Err(why) => {
            // One installed later, or a Python put on `PATH`, is then found.
            println!("cargo:rerun-if-env-changed=PATH");
            println!("cargo:warning=no Python guests: {why}");
            let guests = guests.into_iter().map(|(g, _)| g).collect();
            return Built { guests, tool: Err(why) };
        }
    };
    if !stale.is_empty() {
        let children: Vec<(&Guest, Child)> = stale
            .iter()
            .map(|(g, dir)| {
                // componentize-py writes `__pycache__` beside the sources it imports: build
                // from a copy, so the source tree (watched by `rerun-if-changed`) stays as it is.
                let stage = out.join("src").join(&g.name);
                let _ = std::fs::remove_dir_all(&stage);
                copy_dir(dir, &stage);
                copy_dir(&sdk.join("ahp_agent"), &stage.join("ahp_agent"));
                let child = Command::new(&tool)
                    .arg("-d")
                    .arg(&wit)
                    .args(["-w", "agent", "--quiet", "componentize", "app", "-p"])
                    .arg(&stage)
                    .arg("-o")
                    .arg(&g.wasm)
                    .spawn()
                    .expect("run componentize-py");
                (g, child)
            })
            .collect();
        for (g, mut child) in children {
            let status = child.wait().expect("wait for componentize-py");
            assert!(
                status.success(),
                "building the Python guest {} failed (see the output above)",
                g.name
            );
        }
    }
    Built {
        guests: guests.into_iter().map(|(g, _)| g).collect(),
        tool: Ok(tool),
    }
}

/// Copies the directory `from` to `to`, leaving out `__pycache__`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a staging dir");
    for entry in std::fs::read_dir(from).expect("read a Python guest's dir").flatten() {
        let (path, name) = (entry.path(), entry.file_name());
        if path.is_dir() {
            if name != "__pycache__" {
                copy_dir(&path, &to.join(name));
            }
        } else {
            std::fs::copy(&path, to.join(name)).expect("copy a Python source");
        }
    }
}

/// The newest modification time of any file under `paths`.
fn newest(paths: &[&Path]) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut stack: Vec<PathBuf> = paths.iter().map(|p| p.to_path_buf()).collect();
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::metadata(&p) else { continue };
        if meta.is_dir() {
            if p.file_name().is_some_and(|n| n == "__pycache__") {
                continue;
            }
            stack.extend(
                std::fs::read_dir(&p)
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.ok().map(|e| e.path())),
            );
        } else if let Ok(m) = meta.modified() {
            newest = newest.max(m);
        }
    }
    newest
}

/// The componentize-py to run: `AHP_COMPONENTIZE_PY` or the one on `PATH` when it is the
/// pinned version, else the one installed (now, if need be) in this build's own virtual
/// environment; `Err` says why there is none and how to get one.
fn componentize_py(sdk: &Path, target_dir: &Path) -> Result<PathBuf, String> {
    let requirements = sdk.join("build-requirements.txt");
    let pin = std::fs::read_to_string(&requirements).expect("read the componentize-py pin");
    let want = pin
        .lines()
        .find_map(|l| l.trim().strip_prefix("componentize-py=="))
        .expect("build-requirements.txt pins componentize-py")
        .to_owned();
    let version = |tool: &Path| {
        Command::new(tool)
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let wanted = format!("componentize-py {want}");
    let named = std::env::var_os("AHP_COMPONENTIZE_PY").map(PathBuf::from);
    if let Some(tool) = &named {
        return match version(tool) {
            Some(v) if v == wanted => Ok(tool.clone()),
            found => Err(format!(
                "AHP_COMPONENTIZE_PY names {}, which is {}, not {wanted}",
                tool.display(),
                found.unwrap_or_else(|| "not a componentize-py".into())
            )),
        };
    }
    let on_path = PathBuf::from("componentize-py");
    if version(&on_path).is_some_and(|v| v == wanted) {
        return Ok(on_path);
    }
    // Our own, in a virtual environment of the guest target directory.
    let venv = target_dir.join("componentize-py");
    let tool = venv.join("bin/componentize-py");
    if version(&tool).is_some_and(|v| v == wanted) {
        return Ok(tool);
    }
    let how = format!("pip install -r {}", requirements.display());
    println!(
        "cargo:warning=installing {wanted} from PyPI into {} for the Python guests",
        venv.display()
    );
    let python = ["python3", "python"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .ok_or_else(|| {
            format!("the Python guests need {wanted} and Python 3 to install it, which is not installed; then: {how}")
        })?;
    let _ = std::fs::remove_dir_all(&venv);
    let run = |cmd: &mut Command, what: &str| {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    run(
        Command::new(python).args(["-m", "venv"]).arg(&venv),
        "creating a virtual environment for componentize-py",
    )
    .and_then(|()| {
        run(
            Command::new(venv.join("bin/python"))
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg(&requirements),
            "installing componentize-py from PyPI",
        )
    })
    .map_err(|e| format!("the Python guests need {wanted}, and {e}; install it yourself: {how}"))?;
    match version(&tool) {
        Some(v) if v == wanted => Ok(tool),
        found => Err(format!(
            "installed componentize-py into {}, but it reports {}; install {wanted} yourself: {how}",
            venv.display(),
            found.unwrap_or_else(|| "no version".into())
        )),
    }
}
