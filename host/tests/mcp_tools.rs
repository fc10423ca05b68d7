//! The host as MCP client (`ahp:agent/tools`), against the local inventory server
//! (`ahp_host::tools::inventory_server`), a real rmcp server on loopback:
//!
//! - `client`: the host's client itself ([`Toolbox`]): both protocol eras, the injected
//!   credential, names, bounds at the limit and one past, egress bytes counted, the policy ∩
//!   snapshot rule, and hostile servers (huge list, huge result, slow SSE, hang) ending in a
//!   typed error with what the host holds bounded;
//! - `guest`: the same through a sandboxed guest (`tool-prober`) taking conversation turns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ahp_host::policy::Policy;
use ahp_host::shared_store::StoreLock;
use ahp_host::store::{EventKind, McpServer, Store, Tier, TokenKey};
use ahp_host::testing;
use ahp_host::tools::inventory_server::{InventoryServer, Mode};
use ahp_host::tools::{self, Error, Toolbox};
use serde_json::json;

const SECRET: &str = "inventory-secret-7f3a";
const CRED_REF: &str = "inventory-api";

/// A transfer in a fresh database with a vault holding [`SECRET`] behind [`CRED_REF`].
struct World {
    dir: tempfile::TempDir,
    db: ahp_host::shared_store::SharedStore,
    transfer: String,
}

fn world(budget: u64) -> World {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("vault")).unwrap();
    std::fs::write(dir.path().join("vault").join(CRED_REF), SECRET).unwrap();
    let key = TokenKey::random();
    let mut db = Store::open_in_memory().unwrap().with_token_key(key.clone());
    let transfer = testing::pushed(
        &mut db,
        &key,
        &testing::snapshot(0, json!({})),
        Tier::Small,
        budget,
        "forecaster",
    )
    .unwrap();
    // Active, as a transfer whose sandbox calls tools is.
    let token = testing::activate_token(&db, &key, &transfer).unwrap();
    db.begin_activation(&transfer, &token).unwrap();
    db.complete_activation(&transfer).unwrap();
    World {
        dir,
        db: ahp_host::shared_store::share(db),
        transfer,
    }
}

/// A policy allowing loopback and the servers' rules.
fn policy(rules: Vec<ahp_host::policy::ServerRule>) -> Policy {
    Policy {
        servers: rules,
        allow_networks: vec!["127.0.0.0/8".into()],
        models: vec![],
    }
}

fn config(servers: &[&InventoryServer]) -> Vec<McpServer> {
    servers
        .iter()
        .map(|s| McpServer {
            server: s.url(),
            cred_ref: CRED_REF.into(),
        })
        .collect()
}

impl World {
    fn toolbox(&self, mcp: &[McpServer], policy: &Policy, egress: u64, wall_clock: Duration) -> Toolbox {
        let vault = ahp_host::vault::DirVault::open(self.dir.path().join("vault")).unwrap();
        Toolbox::open(
            &self.transfer,
            mcp,
            policy,
            Arc::new(vault),
            self.db.clone(),
            egress,
            wall_clock,
        )
    }

    fn events(&self, kind: EventKind) -> Vec<serde_json::Value> {
        let mut db = self.db.locked();
        db.get_status(&self.transfer)
            .unwrap()
            .events
            .into_iter()
            .filter(|e| e.kind == kind)
            .map(|e| e.detail)
            .collect()
    }
}

async fn server(mode: Mode) -> InventoryServer {
    InventoryServer::start(SECRET, testing::inventory(), mode)
        .await
        .unwrap()
}

mod client {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lists_and_calls_with_the_injected_credential_in_both_eras() {
        for mode in [Mode::Honest, Mode::LegacyOnly] {
            let w = world(1_000_000);
            let s = server(mode.clone()).await;
            let p = policy(vec![s.policy_rule(CRED_REF, 7)]);
            let mut tb = w.toolbox(&config(&[&s]), &p, 64 * MIB, Duration::from_secs(15));
            let listed = tb.list().await.unwrap();
            assert_eq!(listed.len(), 1, "{mode:?}");
            assert_eq!(listed[0].name, "inventory");
            assert_eq!(listed[0].server, s.url());
            assert!(listed[0].input_schema_json.contains("\"sku\""));
            let r = tb.call(&w.db, "inventory", r#"{"sku":"A-1"}"#).await.unwrap();
            assert!(!r.is_error);
            assert_eq!(r.charged_micro_usd, 7);
            let structured: serde_json::Value = serde_json::from_str(r.structured_json.as_deref().unwrap()).unwrap();
            assert_eq!(structured["inventory"][0]["sku"], "A-1");
            assert_eq!(structured["inventory"].as_array().unwrap().len(), 1);
            // A tool error is a result, not an error; it is charged too.
            let r = tb.call(&w.db, "inventory", r#"{"sku":"Z-9"}"#).await.unwrap();
            assert!(r.is_error);
            // The server saw the host's credential on every request; the session was reused.
            let auths = s.authorizations();
            assert!(auths.iter().all(|a| *a == format!("Bearer {SECRET}")), "{auths:?}");
            let methods = s.methods();
            match mode {
                Mode::LegacyOnly => assert!(methods.contains(&"initialize".to_owned()), "{methods:?}"),
                _ => assert!(!methods.contains(&"initialize".to_owned()), "{methods:?}"),
            }
            assert_eq!(methods.iter().filter(|m| *m == "tools/call").count(), 2, "{methods:?}");
            // Charged under the host-reserved kind, audited without arguments or results.
            let calls = w.events(EventKind::ToolCalled);
            assert_eq!(calls.len(), 2);
            assert_eq!(
                calls[0],
                json!({ "server": s.url(), "tool": "inventory", "chargedMicroUsd": 7, "outcome": "ok" })
            );
            assert_eq!(calls[1]["outcome"], "tool_error");
            let usage = w.events(EventKind::UsageReported);
            assert_eq!(usage.len(), 2);
            assert_eq!(usage[0]["kind"], "tool_calls");
            let injected = w.events(EventKind::CredentialResolved);
            assert_eq!(injected.len(), 1, "the first injection is audited once: {injected:?}");
            assert!(tb.egress_used() > 0);
        }
    }

    /// A server that echoes the `Authorization` header it was sent — in a protocol error, in a
    /// result's text, JSON-escaped in its structured content, base64-encoded, and in a tool's
    /// description: the guest sees no form of the secret, and the rest of what it said.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_that_echoes_its_credential_hands_the_guest_no_form_of_it() {
        use base64::Engine;
        let w = world(1_000_000);
        let s = server(Mode::EchoCredential).await;
        let p = policy(vec![s.policy_rule(CRED_REF, 0)]);
        let mut tb = w.toolbox(&config(&[&s]), &p, 64 * MIB, Duration::from_secs(15));
        // Whether `text` holds 6 bytes of the secret in a row, as they are or in any run of
        // base64 characters decoded at any of its four offsets.
        let leaks = |text: &str| {
            let windows: Vec<&[u8]> = SECRET.as_bytes().windows(6).collect();
            let holds = |bytes: &[u8]| windows.iter().any(|w| bytes.windows(6).any(|b| b == *w));
            holds(text.as_bytes())
                || text
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '/'))
                    .any(|run| {
                        (0..4).any(|at| {
                            let run = run.get(at..).unwrap_or("");
                            let run = &run[..run.len() / 4 * 4];
                            let decoded = base64::engine::general_purpose::STANDARD
                                .decode(run)
                                .unwrap_or_default();
                            holds(&decoded)
                        })
                    })
        };
        assert!(leaks(
            &base64::engine::general_purpose::STANDARD.encode(format!("x: {SECRET}"))
        ));
        let tools = tb.list().await.unwrap();
        assert_eq!(tools[0].description, "needs Bearer [credential]");
        let r = tb.call(&w.db, "inventory", "{}").await.unwrap();
        let text = format!("{:?}", r.content);
        assert!(
            !leaks(&text) && text.contains("you sent Authorization: Bearer [credential]"),
            "{text}"
        );
        let structured = r.structured_json.unwrap();
        assert!(!leaks(&structured), "{structured}");
        assert!(structured.contains("[credential]"), "{structured}");
        let e = tb.call(&w.db, "inventory", r#"{"fail": true}"#).await.unwrap_err();
        let message = e.to_string();
        assert!(!leaks(&message) && message.contains("[credential]"), "{message}");
        // The secret did go out, to the server that needs it.
        assert!(s.authorizations().iter().all(|a| a == &format!("Bearer {SECRET}")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refusals_change_nothing_and_send_nothing() {
        let w = world(1_000_000);
        let s = server(Mode::Honest).await;
        let p = policy(vec![s.policy_rule(CRED_REF, 7)]);
        let mut tb = w.toolbox(&config(&[&s]), &p, 64 * MIB, Duration::from_secs(15));
        assert!(matches!(tb.call(&w.db, "nope", "{}").await, Err(Error::UnknownTool(_))));
        let calls_before = s.methods().iter().filter(|m| *m == "tools/call").count();
        for bad in ["[1]", "\"x\"", "not json", ""] {
            let e = tb.call(&w.db, "inventory", bad).await.unwrap_err();
            assert!(matches!(e, Error::InvalidArguments(_)), "{bad}: {e:?}");
        }
        // Arguments at the bound go out; one byte past does not.
        let at = format!("{{\"pad\":\"{}\"}}", "x".repeat(tools::MAX_ARGUMENTS_BYTES - 10));
        assert_eq!(at.len(), tools::MAX_ARGUMENTS_BYTES);
        assert!(tb.call(&w.db, "inventory", &at).await.is_ok());
        let past = format!("{{\"pad\":\"{}\"}}", "x".repeat(tools::MAX_ARGUMENTS_BYTES - 9));
        assert!(matches!(
            tb.call(&w.db, "inventory", &past).await,
            Err(Error::InvalidArguments(_))
        ));
        let sent = s.methods().iter().filter(|m| *m == "tools/call").count();
        assert_eq!(sent, calls_before + 1, "only the call at the bound was sent");
        assert_eq!(
            w.events(EventKind::ToolCalled).len(),
            1,
            "refusals are not charged or audited"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn per_turn_bounds_at_the_limit_and_one_past() {
        let w = world(1_000_000);
        let s = server(Mode::Honest).await;
        let p = policy(vec![s.policy_rule(CRED_REF, 0)]);
        let mut tb = w.toolbox(&config(&[&s]), &p, 64 * MIB, Duration::from_secs(15));
        for _ in 0..tools::MAX_LISTS_PER_TURN {
            tb.list().await.unwrap();
        }
        assert!(matches!(tb.list().await, Err(Error::Refused(_))));
        for _ in 0..tools::MAX_CALLS_PER_TURN {
            tb.call(&w.db, "inventory", "{}").await.unwrap();
        }
        assert!(matches!(
            tb.call(&w.db, "inventory", "{}").await,
            Err(Error::Refused(_))
        ));
        tb.start_turn();
        assert!(
            tb.call(&w.db, "inventory", "{}").await.is_ok(),
            "a new turn, new counts"
        );
        assert!(tb.list().await.is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_servers_of_both_the_policy_and_the_snapshot_are_reached() {
        let w = world(1_000_000);
        let (a, b, c) = (
            server(Mode::Honest).await,
            server(Mode::Honest).await,
            server(Mode::Honest).await,
        );
        // a: both; b: policy only; c: snapshot only.
        let p = policy(vec![a.policy_rule(CRED_REF, 0), b.policy_rule(CRED_REF, 0)]);
        let mut tb = w.toolbox(&config(&[&a, &c]), &p, 64 * MIB, Duration::from_secs(15));
        let listed = tb.list().await.unwrap();
        assert_eq!(listed.iter().map(|t| t.server.clone()).collect::<Vec<_>>(), [a.url()]);
        assert!(b.methods().is_empty() && c.methods().is_empty());
        assert!(b.authorizations().is_empty() && c.authorizations().is_empty());
        // Two reachable servers with the same tool: both named by position, both callable.
        let mut tb = w.toolbox(&config(&[&a, &b]), &p, 64 * MIB, Duration::from_secs(15));
        let names: Vec<String> = tb.list().await.unwrap().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["s1_inventory", "s2_inventory"]);
        assert!(tb.call(&w.db, "s2_inventory", "{}").await.is_ok());
        assert!(matches!(
            tb.call(&w.db, "inventory", "{}").await,
            Err(Error::UnknownTool(_))
        ));
        assert_eq!(b.methods().iter().filter(|m| *m == "tools/call").count(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_huge_tool_list_is_cut_at_the_bound_and_a_flood_left_out() {
        let w = world(1_000_000);
        // 300 tools (plus `inventory`) of short descriptions: cut at 256, in the server's order;
        // descriptions over 4 KiB are cut.
        let many = server(Mode::HugeList {
            tools: 300,
            description: 5000,
        })
        .await;
        let p = policy(vec![many.policy_rule(CRED_REF, 0)]);
        let mut tb = w.toolbox(&config(&[&many]), &p, 64 * MIB, Duration::from_secs(15));
        let listed = tb.list().await.unwrap();
        assert_eq!(listed.len(), tools::MAX_TOOLS);
        assert_eq!(listed[0].name, "inventory");
        assert_eq!(listed[255].name, "extra_254");
        assert!(
            listed
                .iter()
                .all(|t| t.description.len() <= tools::MAX_DESCRIPTION_BYTES)
        );
        assert_eq!(listed[1].description.len(), tools::MAX_DESCRIPTION_BYTES);
        // One whose list passes the response bound (2,000 × 4 KiB ≈ 8 MiB) is left out; the
        // honest server beside it is listed.
        let flood = server(Mode::HugeList {
            tools: 2000,
            description: 4096,
        })
        .await;
        let honest = server(Mode::Honest).await;
        let p = policy(vec![flood.policy_rule(CRED_REF, 0), honest.policy_rule(CRED_REF, 0)]);
        let mut tb = w.toolbox(&config(&[&flood, &honest]), &p, 64 * MIB, Duration::from_secs(15));
        let listed = tb.list().await.unwrap();
        assert_eq!(
            listed.iter().map(|t| t.server.clone()).collect::<Vec<_>>(),
            [honest.url()]
        );
        assert!(tb.egress_used() < 64 * MIB);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_huge_result_is_too_large_at_one_past_the_bound() {
        let w = world(1_000_000);
        // At the bound: a text of 4 MiB passes (its JSON envelope fits the response bound).
        let at = server(Mode::HugeResult(tools::MAX_RESULT_BYTES)).await;
        let p = policy(vec![at.policy_rule(CRED_REF, 1)]);
        let mut tb = w.toolbox(&config(&[&at]), &p, 64 * MIB, Duration::from_secs(15));
        let r = tb.call(&w.db, "inventory", "{}").await.unwrap();
        assert!(matches!(&r.content[0], tools::Content::Text(t) if t.len() == tools::MAX_RESULT_BYTES));
        // One past.
        let past = server(Mode::HugeResult(tools::MAX_RESULT_BYTES + 1)).await;
        let p = policy(vec![past.policy_rule(CRED_REF, 1)]);
        let mut tb = w.toolbox(&config(&[&past]), &p, 64 * MIB, Duration::from_secs(15));
        assert!(matches!(
            tb.call(&w.db, "inventory", "{}").await,
            Err(Error::TooLarge(_))
        ));
        // A flood far past the bound is cut at the response bound: never read whole.
        let flood = server(Mode::HugeResult(100 * 1024 * 1024)).await;
        let p = policy(vec![flood.policy_rule(CRED_REF, 1)]);
        let mut tb = w.toolbox(&config(&[&flood]), &p, 512 * MIB, Duration::from_secs(15));
        let e = tb.call(&w.db, "inventory", "{}").await.unwrap_err();
        assert!(matches!(e, Error::TooLarge(_)), "{e:?}");
        assert!(
            tb.egress_used() < 2 * tools::client::MAX_RESPONSE_BYTES as u64,
            "read {} bytes",
            tb.egress_used()
        );
        // Each sent call was charged and audited with its outcome.
        let outcomes: Vec<_> = w
            .events(EventKind::ToolCalled)
            .into_iter()
            .map(|d| d["outcome"].clone())
            .collect();
        assert_eq!(outcomes, [json!("ok"), json!("too_large"), json!("too_large")]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hanging_or_trickling_server_ends_before_the_turn_does() {
        for mode in [Mode::Hang, Mode::SlowSse] {
            let w = world(1_000_000);
            let s = server(mode.clone()).await;
            let p = policy(vec![s.policy_rule(CRED_REF, 3)]);
            let wall = Duration::from_secs(2);
            let mut tb = w.toolbox(&config(&[&s]), &p, 64 * MIB, wall);
            tb.list().await.unwrap();
            let started = Instant::now();
            let e = tb.call(&w.db, "inventory", "{}").await.unwrap_err();
            let took = started.elapsed();
            assert!(matches!(e, Error::Unavailable(_)), "{mode:?}: {e:?}");
            assert!(took < wall, "{mode:?}: took {took:?}");
            assert_eq!(tb.connected(), 0, "the stuck session is dropped");
            let calls = w.events(EventKind::ToolCalled);
            assert_eq!(calls[0]["outcome"], "unavailable");
            assert_eq!(
                calls[0]["chargedMicroUsd"], 3,
                "a sent call is charged whatever its outcome"
            );
            // No time is left in this turn; the next turn calls again.
            assert!(matches!(
                tb.call(&w.db, "inventory", "{}").await,
                Err(Error::Unavailable(_))
            ));
            tb.start_turn();
            assert!(tb.list().await.is_ok(), "{mode:?}: the server still lists");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn egress_is_counted_and_its_ceiling_refuses() {
        let w = world(1_000_000);
        let s = server(Mode::Honest).await;
        let p = policy(vec![s.policy_rule(CRED_REF, 0)]);
        let mut tb = w.toolbox(&config(&[&s]), &p, 64 * MIB, Duration::from_secs(15));
        tb.list().await.unwrap();
        let after_list = tb.egress_used();
        tb.call(&w.db, "inventory", "{}").await.unwrap();
        let one_call = tb.egress_used() - after_list;
        // A request line, headers, the JSON body and its answer: hundreds of bytes, not zero.
        assert!(one_call > 300, "{one_call}");
        // A ceiling that admits the listing and not one more call.
        let mut tb = w.toolbox(&config(&[&s]), &p, after_list + one_call / 2, Duration::from_secs(15));
        tb.list().await.unwrap();
        let e = tb.call(&w.db, "inventory", "{}").await.unwrap_err();
        assert!(matches!(e, Error::Refused(_)), "{e:?}");
        assert!(tb.egress_used() <= after_list + one_call / 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_the_budget_cannot_pay_is_refused_before_it_is_sent() {
        let w = world(10);
        let s = server(Mode::Honest).await;
        let p = policy(vec![s.policy_rule(CRED_REF, 6)]);
        let mut tb = w.toolbox(&config(&[&s]), &p, 64 * MIB, Duration::from_secs(15));
        assert_eq!(tb.call(&w.db, "inventory", "{}").await.unwrap().charged_micro_usd, 6);
        // 4 left: a 6 micro-USD call is refused and not sent.
        let e = tb.call(&w.db, "inventory", "{}").await.unwrap_err();
        assert!(matches!(e, Error::Refused(_)), "{e:?}");
        assert_eq!(s.methods().iter().filter(|m| *m == "tools/call").count(), 1);
        let spent = w.db.locked().budget(&w.transfer).unwrap().unwrap().spent_micro_usd;
        assert_eq!(spent, 6, "spend never passes the allocation");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_refusing_the_credential_is_left_out_of_the_list() {
        let w = world(1_000_000);
        let s = InventoryServer::start("another-secret", testing::inventory(), Mode::Honest)
            .await
            .unwrap();
        let p = policy(vec![s.policy_rule(CRED_REF, 0)]);
        let mut tb = w.toolbox(&config(&[&s]), &p, 64 * MIB, Duration::from_secs(15));
        assert_eq!(tb.list().await.unwrap(), []);
        assert!(matches!(
            tb.call(&w.db, "inventory", "{}").await,
            Err(Error::UnknownTool(_))
        ));
    }
}

mod guest {
    use super::*;
    use ahp_host::host::HostBuilder;
    use ahp_host::sandbox::{CeilingCap, RunOutcome};
    use ahp_host::shared_store::StoreLock;
    use ahp_host::store::conversation::{
        Acting, Caller, IdempotencyKey, NewConversation, NewMessage, OPERATOR_SUBJECT,
    };
    use ahp_host::store::{SnapshotInput, TransferStatus};

    /// A host carrying one tool-prober agent whose snapshot lists `servers`, under `policy`.
    struct Agent {
        _dir: tempfile::TempDir,
        _runtime: tokio::runtime::Runtime,
        host: ahp_host::host::Host,
        transfer: String,
        agent: String,
        cv: String,
        caller: Caller,
    }

    fn agent(
        tier: Tier,
        cap: CeilingCap,
        servers: Vec<McpServer>,
        policy: Policy,
        runtime: tokio::runtime::Runtime,
    ) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("vault")).unwrap();
        std::fs::write(dir.path().join("vault").join(CRED_REF), SECRET).unwrap();
        let key = TokenKey::random();
        let db = Store::open_in_memory().unwrap().with_token_key(key.clone());
        let host = HostBuilder::new(db, dir.path().join("data"))
            .cap(cap)
            .policy(policy)
            .vault(Arc::new(
                ahp_host::vault::DirVault::open(dir.path().join("vault")).unwrap(),
            ))
            .build()
            .unwrap();
        let sandboxes = host.sandboxes().clone();
        sandboxes
            .register_component_file(ahp_guests::TOOL_PROBER, Some("tool-prober"))
            .unwrap();
        let snap = SnapshotInput {
            mcp_config: servers,
            ..testing::snapshot(0, json!({}))
        };
        let transfer =
            testing::pushed(&mut host.store().locked(), &key, &snap, tier, 1_000_000, "tool-prober").unwrap();
        let tok = testing::activate_token(&host.store().locked(), &key, &transfer).unwrap();
        let report = host.activate(&transfer, &tok).unwrap();
        assert_eq!(report.outcome, RunOutcome::Returned);
        let agent = report.transfer.agent_id.unwrap();
        let caller = Caller::full(OPERATOR_SUBJECT).unwrap();
        let cv = host
            .store()
            .locked()
            .create_conversation(
                &caller,
                &NewConversation {
                    title: "tools".into(),
                    agents: vec![agent.clone()],
                },
                "cv-tools",
            )
            .unwrap()
            .value
            .id;
        Agent {
            _dir: dir,
            _runtime: runtime,
            host,
            transfer,
            agent,
            cv,
            caller,
        }
    }

    impl Agent {
        /// Posts `body`, runs the agent's turn, returns its reply.
        fn ask(&self, body: &str) -> String {
            let new = NewMessage {
                conversation: self.cv.clone(),
                acting: Acting::Human,
                body: body.to_owned(),
                reply_to: None,
                idempotency: IdempotencyKey::Key(format!("{}-{}", body.len(), getrandom_key())),
            };
            let question = self
                .host
                .store()
                .locked()
                .post_message(&self.caller, &new)
                .unwrap()
                .value
                .id;
            let drive = self.host.agents().drive(&self.agent).unwrap();
            assert_eq!(drive.consumed, 1, "{body}: {drive:?}");
            self.host
                .store()
                .locked()
                .read_transcript(&self.caller, &Acting::Human, &self.cv, 0, 200)
                .unwrap()
                .into_iter()
                .find(|m| m.reply_to.as_deref() == Some(&question))
                .map(|m| m.body)
                .expect("the agent replied")
        }

        fn events(&self, kind: EventKind) -> Vec<serde_json::Value> {
            self.host
                .store()
                .locked()
                .get_status(&self.transfer)
                .unwrap()
                .events
                .into_iter()
                .filter(|e| e.kind == kind)
                .map(|e| e.detail)
                .collect()
        }
    }

    fn getrandom_key() -> String {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_string()
    }

    fn runtime_with(modes: &[Mode]) -> (tokio::runtime::Runtime, Vec<InventoryServer>) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let servers = modes.iter().map(|m| rt.block_on(server(m.clone()))).collect();
        (rt, servers)
    }

    #[test]
    fn a_guest_lists_and_calls_a_tool_with_a_credential_it_never_sees() {
        let (rt, s) = runtime_with(&[Mode::Honest]);
        let p = policy(vec![s[0].policy_rule(CRED_REF, 5)]);
        let a = agent(Tier::Small, CeilingCap::default(), config(&[&s[0]]), p, rt);
        assert_eq!(a.ask("list"), format!("1 tools: inventory@{}", s[0].url()));
        let reply = a.ask(r#"call inventory {"sku":"A-1"}"#);
        assert!(reply.starts_with("ok is-error=false charged=5 "), "{reply}");
        assert!(reply.contains(r#""sku":"A-1""#), "{reply}");
        assert!(!reply.contains("B-2"), "{reply}");
        // The server saw the credential; the guest cannot resolve it (the policy does not reveal it).
        assert!(s[0].authorizations().iter().all(|v| *v == format!("Bearer {SECRET}")));
        let denied = a.ask(&format!("resolve {CRED_REF}"));
        assert!(denied.starts_with("denied: "), "{denied}");
        assert!(!denied.contains(SECRET));
        let calls = a.events(EventKind::ToolCalled);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0]["chargedMicroUsd"], 5);
        assert!(
            !calls[0].to_string().contains("A-1"),
            "no arguments in the audit: {}",
            calls[0]
        );
    }

    #[test]
    fn unknown_tools_bad_arguments_and_the_per_turn_bounds() {
        let (rt, s) = runtime_with(&[Mode::Honest]);
        let p = policy(vec![s[0].policy_rule(CRED_REF, 0)]);
        let a = agent(Tier::Small, CeilingCap::default(), config(&[&s[0]]), p, rt);
        assert!(a.ask("call nope {}").starts_with("error unknown-tool: "));
        assert!(a.ask("call inventory [1]").starts_with("error invalid-arguments: "));
        let at = a.ask(&format!("call-big inventory {}", tools::MAX_ARGUMENTS_BYTES));
        assert!(at.starts_with("ok "), "{at}");
        let past = a.ask(&format!("call-big inventory {}", tools::MAX_ARGUMENTS_BYTES + 1));
        assert!(past.starts_with("error invalid-arguments: "), "{past}");
        let n = tools::MAX_CALLS_PER_TURN;
        let calls = a.ask(&format!("count-calls {} inventory {{}}", n + 1));
        assert!(
            calls.starts_with(&format!("{n} calls, then: error refused: ")),
            "{calls}"
        );
        let n = tools::MAX_LISTS_PER_TURN;
        let lists = a.ask(&format!("count-lists {}", n + 1));
        assert!(
            lists.starts_with(&format!("{n} calls, then: error refused: ")),
            "{lists}"
        );
        assert_eq!(a.ask(&format!("count-lists {n}")), format!("{n} calls, then: nothing"));
    }

    #[test]
    fn a_server_not_in_both_the_policy_and_the_snapshot_is_neither_listed_nor_called() {
        let (rt, s) = runtime_with(&[Mode::Honest, Mode::Honest]);
        // The snapshot lists both; the policy allows only the second.
        let p = policy(vec![s[1].policy_rule(CRED_REF, 0)]);
        let a = agent(Tier::Small, CeilingCap::default(), config(&[&s[0], &s[1]]), p, rt);
        assert_eq!(a.ask("list"), format!("1 tools: inventory@{}", s[1].url()));
        assert!(a.ask("call inventory {}").starts_with("ok "));
        assert!(s[0].methods().is_empty() && s[0].authorizations().is_empty());
    }

    #[test]
    fn a_hostile_server_ends_the_call_with_a_typed_error_and_the_agent_answers_on() {
        let (rt, s) = runtime_with(&[
            Mode::Hang,
            Mode::SlowSse,
            Mode::HugeResult(tools::MAX_RESULT_BYTES + 1),
            Mode::HugeList {
                tools: 2000,
                description: 4096,
            },
        ]);
        // Nano: a 2 s turn, which a waiting call must end before, so the guest replies. Small
        // for the floods: nano's 4 MiB egress ceiling would refuse them first.
        let cases = [
            (Tier::Nano, "error unavailable: "),
            (Tier::Nano, "error unavailable: "),
            (Tier::Small, "error too-large: "),
            (Tier::Small, "error unknown-tool: "),
        ];
        for (server, (tier, expected)) in s.iter().zip(cases) {
            let p = policy(vec![server.policy_rule(CRED_REF, 0)]);
            let rt2 = tokio::runtime::Runtime::new().unwrap();
            let a = agent(tier, CeilingCap::default(), config(&[server]), p, rt2);
            let started = Instant::now();
            let reply = a.ask("call inventory {}");
            assert!(reply.starts_with(expected), "{}: {reply}", server.url());
            assert!(started.elapsed() < Duration::from_secs(3));
            assert_eq!(a.ask("then-echo"), "echo", "the agent answers the next message");
            let t = a.host.store().locked().transfer(&a.transfer).unwrap();
            assert_eq!(t.status, TransferStatus::Active);
            assert!(a.events(EventKind::CeilingExceeded).is_empty(), "no ceiling was hit");
        }
        drop(rt);
    }

    #[test]
    fn tool_traffic_counts_against_the_egress_ceiling() {
        let (rt, s) = runtime_with(&[Mode::Honest]);
        let p = policy(vec![s[0].policy_rule(CRED_REF, 0)]);
        let cap = CeilingCap {
            egress_bytes: Some(16 * 1024),
            ..CeilingCap::default()
        };
        let a = agent(Tier::Small, cap, config(&[&s[0]]), p, rt);
        let reply = a.ask("count-calls 64 inventory {}");
        let (made, rest) = reply.split_once(" calls, then: ").unwrap();
        let made: u32 = made.parse().unwrap();
        assert!(made > 0 && made < 64, "{reply}");
        assert!(rest.starts_with("error refused: "), "{reply}");
        let breach = a.events(EventKind::CeilingExceeded);
        assert_eq!(breach.len(), 1, "{breach:?}");
        assert_eq!(breach[0]["ceiling"], "egress_bytes");
        assert!(breach[0]["usedBytes"].as_u64().unwrap() <= 16 * 1024);
    }
}
