//! The guest SDK's hand-written copies of the host's facts, tied to the host: its constants
//! (page sizes, the reply bound) equal the host's, the usage kinds it says the host meters are
//! the store's, and each SDK `Error` enum mirrors its WIT interface's `variant error` case for
//! case, so a change on one side cannot drift silently from the other.
//!
//! The SDK is a `wasm32-wasip2` crate, so it is read as source text here, not linked.

use std::collections::BTreeSet;
use std::path::Path;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The value of an integer literal or a product of them (`64 * 1024`).
fn literal(value: &str) -> Option<u64> {
    value
        .split('*')
        .map(|f| f.trim().parse::<u64>().ok())
        .try_fold(1u64, |acc, f| acc.checked_mul(f?))
}

/// Every `pub const NAME: TYPE = VALUE;` of the SDK's sources, as `(file, NAME, VALUE)`.
fn sdk_consts() -> Vec<(String, String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk/src");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let Some(rest) = line.trim().strip_prefix("pub const ") else {
                continue;
            };
            let (name, rest) = rest.split_once(':').expect("a typed const");
            let value = rest.split_once('=').expect("a const has a value").1;
            let value = value.trim().trim_end_matches(';').replace('_', "");
            out.push((file.clone(), name.trim().to_owned(), value));
        }
    }
    out.sort();
    out
}

#[test]
fn every_sdk_constant_equals_the_hosts() {
    // The SDK's one text bound stands for both the instructions and the result.
    assert_eq!(
        ahp_store::delegation::bounds::MAX_TASK_RESULT_BYTES,
        ahp_store::delegation::bounds::MAX_TASK_INSTRUCTIONS_BYTES
    );
    let host: &[(&str, &str, u64)] = &[
        (
            "conversations.rs",
            "MAX_PAGE",
            ahp_host::interfaces::conversations::MAX_PAGE.into(),
        ),
        (
            "conversations.rs",
            "MAX_REPLIES",
            ahp_store::conversation::bounds::MAX_WAKE_REPLY_OPERATIONS.into(),
        ),
        (
            "snapshot.rs",
            "MAX_PAGE",
            ahp_host::interfaces::snapshot::MAX_PAGE.into(),
        ),
        (
            "delegation.rs",
            "MAX_SOURCES",
            ahp_store::delegation::bounds::MAX_WAIT_SOURCES as u64,
        ),
        (
            "delegation.rs",
            "MAX_PAGE",
            ahp_host::interfaces::delegation::MAX_PAGE.into(),
        ),
        (
            "delegation.rs",
            "MAX_CALLS",
            ahp_host::interfaces::delegation::MAX_DELEGATION_CALLS_PER_TURN.into(),
        ),
        (
            "delegation.rs",
            "MAX_WRITES",
            ahp_host::interfaces::delegation::MAX_DELEGATION_WRITES_PER_TURN.into(),
        ),
        (
            "delegation.rs",
            "MAX_TEXT_BYTES",
            ahp_store::delegation::bounds::MAX_TASK_INSTRUCTIONS_BYTES as u64,
        ),
    ];
    // The SDK's own choices, no host bound: the answering loop's default tries and how much
    // of a failure its notice quotes (the Python SDK must still agree, below).
    let own = [
        ("conversations.rs", "DEFAULT_MAX_TRIES"),
        ("conversations.rs", "MAX_NOTICE_REASON_BYTES"),
    ];
    let consts: Vec<_> = sdk_consts()
        .into_iter()
        .filter(|(f, n, _)| !own.contains(&(f.as_str(), n.as_str())))
        .collect();
    for (file, name, value) in &consts {
        let tied = host
            .iter()
            .find(|(f, n, _)| f == file && n == name)
            .unwrap_or_else(|| panic!("the SDK's {file} {name} is tied to no host constant: add it to this test"));
        assert_eq!(
            literal(value),
            Some(tied.2),
            "the SDK's {file} {name} is {value}, the host's {}",
            tied.2
        );
    }
    assert_eq!(consts.len(), host.len(), "a tied constant left the SDK: {consts:?}");
}

#[test]
fn the_usage_kinds_the_sdk_says_the_host_meters_are_the_stores() {
    let metering = read("guest-sdk/src/metering.rs");
    let doc = metering
        .split_once("one the host meters itself")
        .expect("the SDK's invalid-kind doc names the host's kinds")
        .1;
    let doc = doc.split_once(')').expect("the list is in parentheses").0;
    let named: BTreeSet<&str> = doc.split('`').skip(1).step_by(2).collect();
    let host: BTreeSet<&str> = ahp_store::HOST_METERED_USAGE_KINDS.into_iter().collect();
    assert_eq!(named, host);
}

/// The cases of `variant error` in each interface of `wit`, kebab-case.
fn wit_errors(wit: &str) -> Vec<(String, BTreeSet<String>)> {
    let mut out = Vec::new();
    for chunk in wit.split("\ninterface ").skip(1) {
        let name = chunk.split_whitespace().next().unwrap().to_owned();
        let body = chunk.split("\n}").next().unwrap();
        let Some((_, variant)) = body.split_once("variant error {") else {
            continue;
        };
        let variant = variant.split_once("\n    }").expect("the variant closes").0;
        let cases = variant
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .map(|l| l.split(['(', ',']).next().unwrap().trim().to_owned())
            .collect();
        out.push((name, cases));
    }
    out
}

/// The variants of the SDK module's `pub enum Error`, as kebab-case.
fn sdk_error(module: &str) -> BTreeSet<String> {
    let src = read(&format!("guest-sdk/src/{module}.rs"));
    let body = src.split_once("pub enum Error {").expect("the module has an Error").1;
    let body = body.split_once("\n}").unwrap().0;
    body.lines()
        .map(str::trim)
        .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
        .map(|l| {
            let name = l.split(['(', ',', ' ', '{']).next().unwrap();
            let mut kebab = String::new();
            for (i, c) in name.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    kebab.push('-');
                }
                kebab.push(c.to_ascii_lowercase());
            }
            kebab
        })
        .collect()
}

#[test]
fn each_sdk_error_mirrors_its_wit_variant_case_for_case() {
    // Variants the SDK adds of its own, not from the host: a JSON decoding failure of a value
    // the host returned, and a history page the host ended early.
    let sdk_only: &[(&str, &str)] = &[("checkpoint", "encoding"), ("snapshot", "incomplete")];
    let errors = wit_errors(&read("wit/agent.wit"));
    assert!(errors.len() >= 7, "{errors:?}");
    for (interface, wit) in &errors {
        let mut sdk = sdk_error(interface);
        sdk.retain(|v| !sdk_only.contains(&(interface.as_str(), v.as_str())));
        assert_eq!(
            &sdk, wit,
            "the SDK's {interface}::Error and the WIT's `{interface}.error` differ"
        );
    }
}

#[test]
fn the_wit_parser_here_reads_a_variant_as_wit_writes_it() {
    let wit = "package a:b;\n\ninterface x {\n    /// doc\n    variant error {\n        /// one\n        not-found,\n        too-large(u64),\n    }\n}\n";
    let errors = wit_errors(wit);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0, "x");
    assert_eq!(
        errors[0].1,
        ["not-found", "too-large"].into_iter().map(String::from).collect()
    );
}

/// The Python SDK (`guest-sdk-python/ahp_agent/`): every module's text, as `(file, text)`.
fn python_sdk() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk-python/ahp_agent");
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .map(|p| {
            let file = p.file_name().unwrap().to_string_lossy().into_owned();
            (file, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// Every module-level `MAX_NAME = VALUE` of the Python SDK, as `(file, NAME, VALUE)`.
fn python_consts() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (file, text) in python_sdk() {
        for line in text.lines() {
            let Some((name, value)) = line.split_once(" = ") else {
                continue;
            };
            if (name.starts_with("MAX_") || name.starts_with("DEFAULT_"))
                && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            {
                out.push((file.clone(), name.to_owned(), value.trim().replace('_', "")));
            }
        }
    }
    out
}

#[test]
fn every_python_sdk_constant_equals_the_hosts_and_the_rust_sdks() {
    let python = python_consts();
    let rust = sdk_consts();
    assert!(python.len() >= 8, "{python:?}");
    for (file, name, value) in &python {
        // The Rust SDK's twin, which `every_sdk_constant_equals_the_hosts` ties to the host.
        let rs = file.replace(".py", ".rs");
        let twin = rust
            .iter()
            .find(|(f, n, _)| *f == rs && n == name)
            .unwrap_or_else(|| panic!("the Python SDK's {file} {name} has no twin in guest-sdk/src/{rs}"));
        assert_eq!(
            literal(value),
            literal(&twin.2),
            "the Python SDK's {file} {name} is {value}, the Rust SDK's (the host's) {}",
            twin.2
        );
    }
    // And no bound of the Rust SDK is missing from a Python module that mirrors its file.
    for (file, name, _) in &rust {
        let py = file.replace(".rs", ".py");
        if python_sdk().iter().any(|(f, _)| *f == py) {
            assert!(
                python.iter().any(|(f, n, _)| *f == py && n == name),
                "the Rust SDK's {file} {name} is missing from ahp_agent/{py}"
            );
        }
    }
}

/// The kinds (`"kebab-case"`) a Python module's `class Error` docstring lists.
fn python_error_kinds(text: &str) -> Option<BTreeSet<String>> {
    let doc = text.split_once("class Error(AhpError):")?.1;
    let doc = doc.split("\"\"\"").nth(1)?;
    Some(
        doc.split("`\"")
            .skip(1)
            .filter_map(|k| k.split_once("\"`").map(|(k, _)| k.to_owned()))
            .collect(),
    )
}

/// The Python SDK raises the WIT's own case names as `kind` (derived by `_errors.kind_of`), so
/// what can drift is what its modules say and compare: each module's `Error` docstring lists
/// its interface's cases exactly, and every kind the SDK's code compares with or raises is a
/// case of the WIT.
#[test]
fn each_python_sdk_error_names_its_wit_variant_case_for_case() {
    let errors = wit_errors(&read("wit/agent.wit"));
    let sdk = python_sdk();
    for (interface, wit) in &errors {
        let file = format!("{interface}.py");
        let text = &sdk
            .iter()
            .find(|(f, _)| *f == file)
            .unwrap_or_else(|| panic!("the Python SDK has no module for interface {interface}"))
            .1;
        let kinds =
            python_error_kinds(text).unwrap_or_else(|| panic!("ahp_agent/{file} has no documented `class Error`"));
        assert_eq!(
            &kinds, wit,
            "ahp_agent/{file}'s Error and the WIT's `{interface}.error` differ"
        );
    }
    let every: BTreeSet<&String> = errors.iter().flat_map(|(_, cases)| cases).collect();
    let mut compared = 0;
    for (file, text) in &sdk {
        for pattern in ["kind == \"", "kind != \"", "Error(\""] {
            for rest in text.split(pattern).skip(1) {
                let kind = rest.split('"').next().unwrap().to_owned();
                assert!(
                    every.contains(&kind),
                    "ahp_agent/{file} uses the kind {kind:?}, which no WIT error has"
                );
                compared += 1;
            }
        }
    }
    assert!(compared >= 2, "the scan found the SDK's kind comparisons");
}

#[test]
fn the_python_error_docstring_parser_reads_kinds_as_written() {
    let text =
        "class Error(AhpError):\n    \"\"\"Refused: `kind` is `\"no-wake\"` or `\"too-large\"`\n    (detail).\"\"\"\n";
    assert_eq!(
        python_error_kinds(text).unwrap(),
        ["no-wake", "too-large"].into_iter().map(String::from).collect()
    );
    assert_eq!(python_error_kinds("def f(): pass"), None);
}
