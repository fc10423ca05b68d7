//! Activation end to end: the example guests resumed, the compile cache, and what is refused before
//! a guest runs (tokens, components, imports).

#[allow(unused_imports)]
use super::*;

#[test]
pub(super) fn forecaster() {
    let h = host();
    // 600 messages: three pages of the snapshot interface.
    let id = h.pushed(&snapshot(600, inventory()), Tier::Nano, 1_000_000, "forecaster");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::Returned);
    assert_eq!(report.transfer.status, TransferStatus::Active);
    assert!(report.fuel_consumed > 0);
    assert!(report.compute_micro_usd >= 1, "compute is charged");

    let mut db = h.db();
    let saved: Value = serde_json::from_slice(&db.load_checkpoint(&id).unwrap().unwrap().state).unwrap();
    assert_eq!(saved["turn"], 1);
    assert_eq!(saved["messagesSeen"], 600, "resume saw the whole history");
    // A-1 sells 5/day with a 7-day lead time: 35 needed, 10 on hand → reorder 60.
    assert_eq!(saved["reorders"], json!([["A-1", 60]]));
    let status = db.get_status(&id).unwrap();
    let budget = status.budget.unwrap();
    // Only compute: the forecaster calls no model, and reports none.
    assert_eq!(budget.spent_micro_usd, report.compute_micro_usd);
    drop(db);
    let usage = h.events(&id, EventKind::UsageReported);
    assert!(usage.iter().all(|u| u["kind"] == "compute"), "{usage:?}");
    assert!(!usage.is_empty());
    let resolved = h.events(&id, EventKind::CredentialResolved);
    assert_eq!(resolved, vec![json!({ "credRef": "inventory-api" })]);
    let log = h.sandboxes.guest_log(&id).unwrap();
    assert!(log.contains(&format!("{id}: 1 reorders on turn 1")), "{log}");
    assert!(!log.contains(SECRET));

    // A later turn runs on the same live instance and sees its own checkpoint.
    let again = h.run_call(&id).unwrap();
    assert_eq!(again.outcome, RunOutcome::Returned);
    let saved: Value = serde_json::from_slice(&h.db().load_checkpoint(&id).unwrap().unwrap().state).unwrap();
    assert_eq!(saved["turn"], 2);
    assert!(h.sandboxes.drop_sandbox(&id));
    assert!(matches!(h.run_call(&id), Err(ahp_host::sandbox::Error::NoSandbox(_))));
}

#[test]
pub(super) fn second_activation_of_the_same_component_does_no_compile() {
    let cold = tempfile::tempdir().unwrap();
    let h = host_with(CeilingCap::default(), Some(cold.path().to_path_buf()));
    let compiled = h.sandboxes.compiles();
    assert_eq!(
        compiled,
        (guests::ALL.len() + WAT_GUESTS.len()) as u64,
        "registration compiles each component once"
    );
    h.assert_serves_a_forecaster();
    h.assert_serves_a_forecaster();
    assert_eq!(h.sandboxes.compiles(), compiled, "activations compile nothing");
    // Even with the in-memory InstancePres gone, the on-disk cache serves the next activation.
    h.sandboxes.forget_instance_pres();
    h.assert_serves_a_forecaster();
    assert_eq!(h.sandboxes.compiles(), compiled);
    // A restarted host reuses the compiled files.
    let again = host_with(CeilingCap::default(), Some(cold.path().to_path_buf()));
    assert_eq!(again.sandboxes.compiles(), 0);
}

/// A compiled file is native code the host maps and runs: one whose bytes no longer hash to
/// the digest written beside it (a power loss's zeros, a stray write) is compiled again and
/// replaced, never loaded — and so is one with no digest beside it.
#[test]
pub(super) fn a_compiled_file_that_fails_its_digest_is_compiled_again_not_run() {
    let cold = tempfile::tempdir().unwrap();
    let all = (guests::ALL.len() + WAT_GUESTS.len()) as u64;
    assert_eq!(
        host_with(CeilingCap::default(), Some(cold.path().to_path_buf()))
            .sandboxes
            .compiles(),
        all
    );
    let compiled: Vec<PathBuf> = std::fs::read_dir(cold.path().join("compiled"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    assert_eq!(compiled.len() as u64, all);
    for (i, path) in compiled.iter().enumerate() {
        let sidecar = path.with_extension("cwasm.sha256");
        assert_eq!(std::fs::read_to_string(&sidecar).unwrap().len(), 64);
        if i == 0 {
            // No digest beside it.
            std::fs::remove_file(sidecar).unwrap();
        } else {
            // One byte changed in the middle of its code, where wasmtime's own checks of the
            // ELF framing and the engine do not look.
            let mut bytes = std::fs::read(path).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0xff;
            std::fs::write(path, bytes).unwrap();
        }
    }
    let again = host_with(CeilingCap::default(), Some(cold.path().to_path_buf()));
    assert_eq!(again.sandboxes.compiles(), all, "every changed file compiled again");
    again.assert_serves_a_forecaster();
    // The files written again pass their check: the next host compiles nothing.
    assert_eq!(
        host_with(CeilingCap::default(), Some(cold.path().to_path_buf()))
            .sandboxes
            .compiles(),
        0
    );
}

#[test]
pub(super) fn the_assistant_is_embedded_for_the_binary() {
    assert_eq!(
        ahp_host::guests::ASSISTANT_WASM,
        std::fs::read(guests::ASSISTANT).unwrap()
    );
}

#[test]
pub(super) fn a_guest_out_of_budget_during_activation_fails_it() {
    let h = host();
    let id = h.pushed(&snapshot(0, json!({})), Tier::Nano, 1, "loop-forever");
    let report = h.activate(&id);
    assert_eq!(report.outcome, RunOutcome::BudgetExhausted);
    assert_eq!(report.transfer.status, TransferStatus::Pushed);
    let budget = h.db().get_status(&id).unwrap().budget.unwrap();
    assert!(budget.spent_micro_usd <= 1 + 1);
    assert!(
        h.events(&id, EventKind::CeilingExceeded).is_empty(),
        "budget is not a ceiling"
    );
}

#[test]
pub(super) fn activation_is_refused_without_a_valid_token_and_changes_nothing() {
    let h = host();
    let id = h.pushed(&snapshot(1, inventory()), Tier::Nano, 1_000, "forecaster");
    assert!(h.host.activate(&id, "not-a-token").is_err());
    assert_eq!(h.db().transfer(&id).unwrap().status, TransferStatus::Pushed);
    assert_eq!(h.sandboxes.live_count(), 0);
}

#[test]
pub(super) fn unregistered_or_invalid_components_are_refused() {
    let h = host();
    assert!(h.sandboxes.register_component(b"not wasm", None).is_err());
    assert!(h.sandboxes.register_component(&[], None).is_err());
    let too_big = vec![0u8; ahp_host::store::MAX_COMPONENT_BYTES as usize + 1];
    assert!(h.sandboxes.register_component(&too_big, None).is_err());
    let id = h.pushed(&snapshot(1, inventory()), Tier::Nano, 1_000, "never-registered");
    let tok = issue_transfer_token(&h.key, &id, TokenScope::Activate, h.db().now(), DEFAULT_TOKEN_TTL).unwrap();
    let err = h.host.activate(&id, &tok).unwrap_err();
    assert!(matches!(err, ahp_host::sandbox::Error::UnknownComponent(_)), "{err}");
    let t = h.db().transfer(&id).unwrap();
    assert_eq!((t.status, t.activating), (TransferStatus::Pushed, false));
    assert_eq!(h.events(&id, EventKind::ActivationFailed).len(), 1);
}

#[test]
pub(super) fn a_component_importing_what_the_host_does_not_link_is_refused_at_registration() {
    let data = tempfile::tempdir().unwrap();
    let h = host_with(CeilingCap::default(), Some(data.path().to_path_buf()));
    let files = |dir: &str| std::fs::read_dir(data.path().join(dir)).unwrap().count();
    let before = (files("components"), files("compiled"), h.sandboxes.compiles());
    let err = h
        .sandboxes
        .register_component(&wat_guest("imports-keyvalue"), Some("imports-keyvalue"))
        .unwrap_err();
    assert!(matches!(err, ahp_host::sandbox::Error::InvalidComponent(_)), "{err}");
    assert!(
        err.to_string().contains("imports `wasi:keyvalue/store@0.2.0-draft`"),
        "{err}"
    );
    // Nothing changed: no record, no file left behind.
    assert!(h.db().component("imports-keyvalue").unwrap().is_none());
    assert_eq!((files("components"), files("compiled")), (before.0, before.1));
}

#[test]
pub(super) fn every_example_guest_imports_only_what_the_host_links() {
    let h = host();
    let engine = h.sandboxes.engine();
    for (name, path) in guests::ALL {
        let component = wasmtime::component::Component::from_file(engine, path).unwrap();
        let imports: Vec<String> = component
            .component_type()
            .imports(engine)
            .map(|(import, _)| import.to_owned())
            .collect();
        assert!(!imports.is_empty(), "{name}");
        for import in &imports {
            assert!(
                ahp_host::interfaces::is_allowed(import),
                "{name} imports {import}, which is not on the host's allow-list"
            );
            assert!(!import.starts_with("wasi:sockets/") && !import.starts_with("wasi:filesystem/"));
        }
        eprintln!("{name}: {}", imports.join(" "));
    }
}
