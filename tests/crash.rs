//! A host killed mid-activation (`kill -9` of a real `ahp serve`): the next `ahp serve` fails
//! the interrupted activation with a reason, and a new token activates the transfer. And one
//! `ahp serve` per data directory, so no second process can fail a live activation.

use std::process::Command;
use std::time::{Duration, Instant};

use ahp_store::{EventKind, Store, TokenScope, TransferStatus};
use serde_json::json;

use crate::common::{result, token};
use crate::mcp_http::{serve, stateless};

/// Rounds of cpu-burn's mixing loop: about a second of CPU (5 M rounds take ~12 ms, see
/// BENCHMARKS.md), long enough to kill the host while it runs, and far under the `large`
/// tier's 30 × 10⁹ fuel and 90 s per turn, so the retry completes.
const ROUNDS: u64 = 400_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_activation_is_failed_at_restart_and_a_new_token_activates() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["component", "add", ahp_guests::CPU_BURN, "--name", "cpu-burn"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let mut server = serve(dir.path(), &["--auth", "none"]);
    let url = server.url.clone();
    let staged = result(
        &url,
        None,
        "snapshot_state",
        json!({"sourceHost": "laptop-7", "systemPrompt": "burn", "messageHistory": [],
               "toolState": {"rounds": ROUNDS}, "mcpConfig": []}),
    )
    .await;
    let t = staged["structuredContent"]["transferId"]
        .as_str()
        .unwrap_or_else(|| panic!("{staged}"))
        .to_owned();
    let provision = json!({"transferId": t, "token": token(dir.path(), &t, TokenScope::ProvisionRuntime),
                           "tier": "large", "budgetMicroUsd": 1_000_000, "component": "cpu-burn"});
    let r = result(&url, None, "provision_runtime", provision).await;
    assert_eq!(r["structuredContent"]["status"], "provisioned", "{r}");
    let r = result(&url, None, "push_state", json!({"transferId": t})).await;
    assert_eq!(r["structuredContent"]["status"], "pushed", "{r}");

    // Activate, and kill -9 the host while the guest burns.
    let first = token(dir.path(), &t, TokenScope::Activate);
    let activating = {
        let (url, args) = (url.clone(), json!({"transferId": t, "token": first}));
        tokio::spawn(async move {
            let params = json!({"name": "activate", "arguments": args});
            stateless(&url, None, "tools/call", Some("activate"), params).await
        })
    };
    let mut reader = Store::open(dir.path().join("ahp.db")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !reader.transfer(&t).unwrap().activating {
        assert!(Instant::now() < deadline, "the activation never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.child.kill().unwrap(); // SIGKILL: no shutdown code runs.
    server.child.wait().unwrap();
    // The client's request dies with the host.
    let _ = activating.await;
    assert!(
        reader.transfer(&t).unwrap().activating,
        "the activation finished before the kill; raise ROUNDS"
    );

    // Restart: the interrupted activation is failed, with a reason, before anything is served.
    let server = serve(dir.path(), &["--auth", "none"]);
    let after = reader.get_status(&t).unwrap();
    assert_eq!(
        (after.transfer.status, after.transfer.activating),
        (TransferStatus::Pushed, false)
    );
    let last = after.events.last().unwrap();
    assert_eq!(last.kind, EventKind::ActivationFailed);
    let reason = last.detail["reason"].as_str().unwrap();
    assert!(
        reason.contains("interrupted") && reason.contains("new token"),
        "{reason}"
    );

    // The spent token stays spent; a new one activates.
    let replay = result(&server.url, None, "activate", json!({"transferId": t, "token": first})).await;
    assert_eq!(replay["isError"], true, "{replay}");
    let second = token(dir.path(), &t, TokenScope::Activate);
    let r = result(&server.url, None, "activate", json!({"transferId": t, "token": second})).await;
    assert_eq!(r["structuredContent"]["status"], "active", "{r}");
}

#[test]
fn a_second_serve_on_the_same_data_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _first = serve(dir.path(), &["--auth", "none"]);
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["serve", "--http", "127.0.0.1:0", "--auth", "none"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another ahp serve is already using"), "{err}");
}
