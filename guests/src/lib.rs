//! Every guest component of the repository, built for the host's tests and benchmarks: the
//! example agents (`examples/`), the probing and hostile guests of the host's tests
//! (`host/tests/guests/`) and the Python guests, each as the path of its component
//! (`guests/build.rs` builds them; see there).
//!
//! A dev-dependency only: the demo (`cargo run -p ahp-host -- demo`) builds none of this. The
//! Python guests need componentize-py, which the build finds or installs from PyPI; where
//! neither works, [`python_guests`] says why and a Python test skips with that one line —
//! unless `AHP_REQUIRE_PYTHON` (or `CI`) is set, where it fails.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// Whether the Python guests ([`PYTHON`]) were built: `Ok` with the componentize-py that built
/// them, else `Err` with why not and how to get them. A Python test starts with
/// `let Ok(_) = ahp_guests::python_guests("what it tests") else { return };`.
///
/// # Errors
///
/// When there are no Python guests; the reason is printed as one `skipped:` line on the
/// process's stderr (past the test harness's capture, so a passing run still shows it).
///
/// # Panics
///
/// When there are none and `AHP_REQUIRE_PYTHON` or `CI` is set: where they must run, a missing
/// tool fails the test instead of skipping it.
pub fn python_guests(test: &str) -> Result<&'static str, &'static str> {
    use std::io::Write as _;
    COMPONENTIZE_PY.inspect_err(|why| {
        assert!(
            ["AHP_REQUIRE_PYTHON", "CI"]
                .iter()
                .all(|v| std::env::var_os(v).is_none_or(|v| v.is_empty())),
            "AHP_REQUIRE_PYTHON or CI is set but there are no Python guests: {why}"
        );
        let _ = writeln!(std::io::stderr(), "skipped: {test}: {why}");
    })
}

#[cfg(test)]
mod tests {
    /// Every guest of this checkout is built under one directory of its own, named after the
    /// checkout (and a hash of its path): two checkouts sharing a `CARGO_TARGET_DIR` never
    /// overwrite each other's components.
    #[test]
    fn guests_are_built_under_a_directory_of_this_checkout() {
        let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let name = checkout
            .canonicalize()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let keyed = |path: &str| {
            std::path::Path::new(path)
                .ancestors()
                .find(|a| a.parent().and_then(|p| p.file_name()).is_some_and(|n| n == "guests"))
                .and_then(|a| a.file_name())
                .map(|n| n.to_string_lossy().into_owned())
        };
        if std::env::var_os("AHP_GUEST_TARGET_DIR").is_some() {
            return; // the operator chose the directory
        }
        let dirs: std::collections::BTreeSet<_> =
            super::ALL.iter().chain(super::PYTHON).map(|(_, p)| keyed(p)).collect();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        let dir = dirs.into_iter().next().flatten().expect("under <target>/guests/");
        let hash = dir
            .strip_prefix(&format!("{name}-"))
            .unwrap_or_else(|| panic!("{dir} is not named after {name}"));
        assert_eq!(hash.len(), 16, "{dir}");
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{dir}");
    }
}
