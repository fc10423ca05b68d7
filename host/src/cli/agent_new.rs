//! `ahp agent new NAME [--lang rust|python] [--dir D]`: writes a ready agent project.
//!
//! The templates are the files of `templates/<language>/` in the repository, embedded in the
//! binary by `build.rs` (so the command works from any directory, offline). In a template,
//! `{{name}}` becomes the project's name, `{{crate_name}}` its name with `-` as `_` (the file
//! name of the Rust component), `{{sdk_version}}` the SDK's version, `{{componentize_py}}` the
//! componentize-py version the Python SDK pins and `{{python_build}}` [`PYTHON_BUILD`]; a file
//! name ending in `.tmpl` loses that suffix (so `Cargo.toml.tmpl` is no manifest inside the ahp
//! repository).
//!
//! A Rust project also gets the guest SDK vendored: `ahp-guest/src/` and `wit/agent.wit`, the
//! very SDK and WIT this binary links, so the project builds outside the repository and its
//! component matches this host. A Python project gets the Python SDK the same way: the
//! `ahp_agent/` package, `wit/agent.wit` and `build-requirements.txt` (the componentize-py
//! version the SDK is tested with); it builds with the one command [`PYTHON_BUILD`]. A language
//! whose template directory is empty is refused; no partial project is ever written.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};

/// What `build.rs` embeds (its statics are `pub` for any includer; here they stay in the CLI).
#[allow(unreachable_pub)]
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/templates.rs"));
}

/// The one command that builds a Python project into `agent.wasm` (its README's).
pub(crate) const PYTHON_BUILD: &str = "componentize-py -d wit/agent.wit -w agent componentize app -o agent.wasm";

/// The componentize-py version a Python project builds with (`guest-sdk-python`'s pin).
fn componentize_py_version() -> &'static str {
    include_str!("../../../guest-sdk-python/build-requirements.txt")
        .trim()
        .strip_prefix("componentize-py==")
        .expect("build-requirements.txt pins componentize-py")
}

/// Longest project name, in bytes (a crate name crates.io would take is at most 64).
pub(crate) const MAX_NAME_BYTES: usize = 64;

/// The languages a project can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Lang {
    /// A Rust crate built for `wasm32-wasip2` with the vendored guest SDK.
    Rust,
    /// A Python package built with componentize-py.
    Python,
}

impl Lang {
    fn dir(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Python => "python",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct NewArgs {
    /// The agent's name: a crate name (lowercase ASCII letters, digits, `-` and `_`, starting
    /// with a letter, at most 64 bytes).
    name: String,
    /// The language of the project.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// Where to write the project [default: ./NAME]; must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Checks that `name` is a crate (and Python package) name.
fn validate_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!("the name must be 1 to {MAX_NAME_BYTES} bytes"));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err("the name must start with a lowercase ASCII letter".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "the name may hold only lowercase ASCII letters, digits, '-' and '_' (not {c:?})"
        ));
    }
    // Names cargo refuses for a package, or that would shadow a crate every project uses.
    const RESERVED: &[&str] = &[
        "ahp-guest",
        "ahp_guest",
        "std",
        "core",
        "alloc",
        "test",
        "proc-macro",
        "self",
        "crate",
        "super",
    ];
    if RESERVED.contains(&name) {
        return Err(format!("{name:?} is reserved"));
    }
    Ok(())
}

/// The project's files, as `(relative path, bytes)`, for `name` in `lang`.
///
/// # Errors
///
/// When this binary carries no template for `lang`.
fn project_files(name: &str, lang: Lang) -> anyhow::Result<Vec<(PathBuf, Vec<u8>)>> {
    let crate_name = name.replace('-', "_");
    let fill = |bytes: &[u8]| match std::str::from_utf8(bytes) {
        Ok(text) => text
            .replace("{{name}}", name)
            .replace("{{crate_name}}", &crate_name)
            .replace("{{sdk_version}}", env!("CARGO_PKG_VERSION"))
            .replace("{{componentize_py}}", componentize_py_version())
            .replace("{{python_build}}", PYTHON_BUILD)
            .into_bytes(),
        Err(_) => bytes.to_vec(),
    };
    let mut files: Vec<(PathBuf, Vec<u8>)> = embedded::TEMPLATES
        .iter()
        .filter(|(l, _, _)| *l == lang.dir())
        .map(|(_, path, bytes)| (PathBuf::from(path.strip_suffix(".tmpl").unwrap_or(path)), fill(bytes)))
        .collect();
    anyhow::ensure!(
        !files.is_empty(),
        "this ahp has no {} template (templates/{}/ was empty when it was built); no project was written",
        lang.dir(),
        lang.dir()
    );
    let sdk = match lang {
        Lang::Rust => embedded::GUEST_SDK,
        Lang::Python => embedded::PYTHON_SDK,
    };
    files.extend(sdk.iter().map(|(path, bytes)| (PathBuf::from(path), bytes.to_vec())));
    Ok(files)
}

/// Writes the project; refuses an existing non-empty directory and changes nothing then.
pub(crate) fn run(args: NewArgs) -> anyhow::Result<()> {
    validate_name(&args.name).map_err(|why| anyhow::anyhow!("invalid agent name {:?}: {why}", args.name))?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    let files = project_files(&args.name, args.lang)?;
    if let Ok(mut entries) = std::fs::read_dir(&dir) {
        anyhow::ensure!(
            entries.next().is_none(),
            "{} exists and is not empty; choose another --dir",
            dir.display()
        );
    } else if dir.exists() {
        anyhow::bail!("{} exists and is not a directory", dir.display());
    }
    write_all(&dir, &files)?;
    println!("wrote the {} agent {} in {}", args.lang.dir(), args.name, dir.display());
    match args.lang {
        Lang::Rust => {
            let wasm = format!("target/wasm32-wasip2/release/{}.wasm", args.name.replace('-', "_"));
            println!("\n  cd {}", dir.display());
            println!("  cargo build --release --target wasm32-wasip2");
            println!("  ahp run {wasm} --snapshot snapshot.json --message Hello");
            println!("\nThe guest SDK is vendored in ahp-guest/ (with wit/agent.wit): the project builds anywhere.");
        }
        Lang::Python => {
            println!("\n  cd {}", dir.display());
            println!(
                "  pip install -r build-requirements.txt   # once: componentize-py {}",
                componentize_py_version()
            );
            println!("  {PYTHON_BUILD}");
            println!("  ahp run agent.wasm --snapshot snapshot.json --message Hello");
            println!("\nThe Python SDK is vendored in ahp_agent/ (with wit/agent.wit): the project builds anywhere.");
        }
    }
    Ok(())
}

/// Writes every file under `dir`.
fn write_all(dir: &Path, files: &[(PathBuf, Vec<u8>)]) -> anyhow::Result<()> {
    for (path, bytes) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_crate_names_bounded_at_64_bytes() {
        assert!(validate_name("my-agent_2").is_ok());
        assert!(validate_name(&"a".repeat(MAX_NAME_BYTES)).is_ok());
        assert!(validate_name(&"a".repeat(MAX_NAME_BYTES + 1)).is_err());
        for bad in [
            "",
            "2fast",
            "My-Agent",
            "my agent",
            "../x",
            "a/b",
            "é",
            "-x",
            "ahp-guest",
            "std",
        ] {
            assert!(validate_name(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn a_rust_project_has_its_manifest_its_source_and_the_vendored_sdk() {
        let files = project_files("my-agent", Lang::Rust).unwrap();
        let paths: Vec<String> = files.iter().map(|(p, _)| p.display().to_string()).collect();
        for want in [
            "Cargo.toml",
            "src/lib.rs",
            "README.md",
            "snapshot.json",
            "ahp-guest/Cargo.toml",
            "ahp-guest/src/lib.rs",
            "wit/agent.wit",
        ] {
            assert!(paths.iter().any(|p| p == want), "{want} missing from {paths:?}");
        }
        assert!(paths.iter().all(|p| !p.ends_with(".tmpl") && !p.contains("{{")));
        let manifest = &files.iter().find(|(p, _)| p == Path::new("Cargo.toml")).unwrap().1;
        let manifest = String::from_utf8_lossy(manifest);
        assert!(manifest.contains("name = \"my-agent\"") && !manifest.contains("{{"));
        // The snapshot is one `snapshot_state` takes.
        let snapshot = &files.iter().find(|(p, _)| p == Path::new("snapshot.json")).unwrap().1;
        let snapshot: ahp_store::SnapshotInput = serde_json::from_slice(snapshot).unwrap();
        assert!(snapshot.system_prompt.contains("my-agent"));
    }

    #[test]
    fn the_vendored_sdk_is_every_file_of_guest_sdk_src() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/src");
        let mut on_disk: Vec<String> = std::fs::read_dir(&src)
            .unwrap()
            .map(|e| format!("ahp-guest/src/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        on_disk.sort();
        let mut vendored: Vec<String> = embedded::GUEST_SDK
            .iter()
            .map(|(p, _)| (*p).to_owned())
            .filter(|p| p.starts_with("ahp-guest/src/"))
            .collect();
        vendored.sort();
        assert_eq!(vendored, on_disk);
        let wit = embedded::GUEST_SDK
            .iter()
            .find(|(p, _)| *p == "wit/agent.wit")
            .unwrap()
            .1;
        assert_eq!(wit, std::fs::read(src.join("../../wit/agent.wit")).unwrap());
    }

    #[test]
    fn a_python_project_has_its_app_the_vendored_sdk_and_the_build_command() {
        let files = project_files("py-agent", Lang::Python).unwrap();
        let paths: Vec<String> = files.iter().map(|(p, _)| p.display().to_string()).collect();
        for want in [
            "app.py",
            "README.md",
            "snapshot.json",
            "build-requirements.txt",
            "ahp_agent/__init__.py",
            "ahp_agent/delegation.py",
            "wit/agent.wit",
        ] {
            assert!(paths.iter().any(|p| p == want), "{want} missing from {paths:?}");
        }
        let text = |path: &str| {
            String::from_utf8_lossy(&files.iter().find(|(p, _)| p == Path::new(path)).unwrap().1).into_owned()
        };
        assert!(files.iter().all(|(_, b)| !String::from_utf8_lossy(b).contains("{{")));
        let readme = text("README.md");
        assert!(
            readme.contains(PYTHON_BUILD) && readme.contains("# py-agent"),
            "{readme}"
        );
        assert_eq!(
            text("build-requirements.txt").trim(),
            format!("componentize-py=={}", componentize_py_version())
        );
        let snapshot: ahp_store::SnapshotInput = serde_json::from_slice(text("snapshot.json").as_bytes()).unwrap();
        assert!(snapshot.system_prompt.contains("py-agent"));
        // Every module of the repository's Python SDK, byte for byte.
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk-python/ahp_agent");
        let mut on_disk: Vec<(String, Vec<u8>)> = std::fs::read_dir(&sdk)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "py"))
            .map(|p| {
                let name = format!("ahp_agent/{}", p.file_name().unwrap().to_string_lossy());
                (name, std::fs::read(p).unwrap())
            })
            .collect();
        on_disk.sort();
        let mut vendored: Vec<(String, Vec<u8>)> = files
            .iter()
            .filter(|(p, _)| p.starts_with("ahp_agent"))
            .map(|(p, b)| (p.display().to_string(), b.clone()))
            .collect();
        vendored.sort();
        assert_eq!(vendored, on_disk);
    }

    /// The vendored SDK's manifest names the versions the repository's SDK builds with.
    #[test]
    fn the_vendored_sdk_manifest_pins_the_workspace_versions() {
        let vendored = String::from_utf8_lossy(
            embedded::TEMPLATES
                .iter()
                .find(|(l, p, _)| *l == "rust" && *p == "ahp-guest/Cargo.toml.tmpl")
                .unwrap()
                .2,
        )
        .into_owned();
        let workspace = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml")).unwrap();
        for dep in ["serde", "serde_json", "wit-bindgen"] {
            let line = |text: &str| {
                text.lines()
                    .find(|l| l.starts_with(&format!("{dep} = ")))
                    .map(str::to_owned)
                    .unwrap_or_else(|| panic!("{dep} missing"))
            };
            assert_eq!(line(&vendored), line(&workspace), "{dep} differs from the workspace's");
        }
    }
}
