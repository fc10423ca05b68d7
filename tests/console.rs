//! The console at `/console` of a real `ahp serve --http`: its refusals over plain HTTP, and a
//! person's session in headless Chromium (sign in, watch a transfer go live, sign out).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ahp_store::{McpServer, Message, SnapshotInput, Store, Tier, TokenKey, TokenScope, TransferOwner};
use reqwest::StatusCode;
use reqwest::redirect::Policy;
use serde_json::json;

use crate::browser::Browser;
use crate::common::token;
use crate::mcp_http::{Server, message, principal, serve, stateless};
use crate::mcp_stdio::register_forecaster;

/// Where the browser test leaves its screenshots, for a person to look at.
pub(crate) fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots")
}

pub(crate) fn base(server: &Server) -> String {
    server.url.trim_end_matches("/mcp").to_owned()
}

pub(crate) const FORM: &str = "application/x-www-form-urlencoded";

/// An HTML form's body.
pub(crate) fn form(fields: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(Policy::none()).build().unwrap()
}

/// A transfer pushed on the data directory's database, ready to activate the forecaster.
/// A `pushed` transfer owned by the principal of the API key `owner` (the console shows a key
/// only its own transfers).
fn pushed(dir: &Path, source_host: &str, owner: &str) -> String {
    let key = TokenKey::from_env_or_file(dir).unwrap();
    let mut store = Store::open(dir.join("ahp.db")).unwrap().with_token_key(key);
    let owner = TransferOwner::ApiKey(store.authenticate(owner).unwrap().expect("a known key").id);
    let snap = SnapshotInput {
        source_host: source_host.into(),
        system_prompt: "You forecast inventory.".into(),
        message_history: vec![Message {
            role: "user".into(),
            content: "hi".into(),
        }],
        tool_state: ahp_host::testing::inventory(),
        mcp_config: vec![McpServer {
            server: "https://inventory.example.com/mcp".into(),
            cred_ref: "inventory-api".into(),
        }],
    };
    let id = store.snapshot_state_as(&snap, &owner).unwrap().id;
    let provision = token(dir, &id, TokenScope::ProvisionRuntime);
    store
        .provision_runtime(&id, Tier::Nano, 50_000, "forecaster", &provision)
        .unwrap();
    store.push_state(&id, None).unwrap();
    id
}

/// Signs in with `key` from the server's own origin; returns the session cookie.
pub(crate) async fn sign_in(base: &str, key: &str) -> String {
    let r = client()
        .post(format!("{base}/console/sign-in"))
        .header("Origin", base)
        .header("Content-Type", FORM)
        .body(form(&[("key", key)]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    cookie.split(';').next().unwrap().to_owned()
}

pub(crate) async fn get(url: &str, cookie: Option<&str>) -> reqwest::Response {
    let mut req = client().get(url);
    if let Some(c) = cookie {
        req = req.header("Cookie", c);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn the_console_refuses_strangers_foreign_origins_and_missing_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let reader = principal(dir.path(), "watcher", &["transfer:read"]);
    let talker = principal(dir.path(), "talker", &["communication:read"]);
    let server = serve(dir.path(), &[]);
    let base = base(&server);
    let t = pushed(dir.path(), "<script>alert(1)</script>", &reader);

    // No session: pages send you to sign in, live regions say 401.
    let r = get(&format!("{base}/console/transfers"), None).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/console/sign-in");
    assert_eq!(get(&format!("{base}/console/transfers/live"), None).await.status(), 401);
    assert_eq!(
        get(&format!("{base}/console/transfers/live"), Some("ahp_console=forged"))
            .await
            .status(),
        401
    );

    // Sign-in: a wrong key, and the right key from a foreign origin or none at all.
    let post = |origin: Option<&'static str>, key: String| {
        let mut req = client()
            .post(format!("{base}/console/sign-in"))
            .header("Content-Type", FORM)
            .body(form(&[("key", &key)]));
        if let Some(o) = origin {
            req = req.header("Origin", o);
        }
        req.send()
    };
    let own: &'static str = Box::leak(base.clone().into_boxed_str());
    assert_eq!(post(Some(own), "ahp_key_wrong".into()).await.unwrap().status(), 401);
    assert_eq!(post(Some(own), "x".repeat(5000)).await.unwrap().status(), 413);
    assert_eq!(
        post(Some("http://evil.example"), reader.clone())
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(post(None, reader.clone()).await.unwrap().status(), 403);
    let r = client()
        .post(format!("{base}/console/sign-in"))
        .header("Origin", own)
        .header("Sec-Fetch-Site", "cross-site")
        .header("Content-Type", FORM)
        .body(form(&[("key", reader.as_str())]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Signed in: pages render under a strict CSP, and what key holders wrote renders as text.
    let cookie = sign_in(&base, &reader).await;
    let r = get(&format!("{base}/console/transfers/{t}"), Some(&cookie)).await;
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'") && !csp.contains("unsafe"));
    let page = r.text().await.unwrap();
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{page}");
    assert!(!page.contains("<script>alert"));
    assert!(page.contains("inventory-api"), "credential references are shown");
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["transfer", "terminate", &t, "--reason", "<img src=x onerror=alert(1)>"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = get(&format!("{base}/console/transfers/{t}/live"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("&lt;img src=x onerror=alert(1)&gt;") && !page.contains("<img"),
        "{page}"
    );
    assert_eq!(
        get(&format!("{base}/console/transfers?status=sideways"), Some(&cookie))
            .await
            .status(),
        400
    );
    assert_eq!(
        get(
            &format!("{base}/console/transfers/tr_ffffffffffffffffffffffff"),
            Some(&cookie)
        )
        .await
        .status(),
        404
    );

    // A foreign Host is refused (DNS rebinding), even with a session.
    let r = client()
        .get(format!("{base}/console/transfers"))
        .header("Host", "evil.example")
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Sign-out needs the session's CSRF token and the own origin.
    let sign_out = |origin: &'static str, csrf: &str| {
        client()
            .post(format!("{base}/console/sign-out"))
            .header("Origin", origin)
            .header("Cookie", &cookie)
            .header("Content-Type", FORM)
            .body(form(&[("csrf", csrf)]))
            .send()
    };
    assert_eq!(sign_out(own, "0000").await.unwrap().status(), 403);
    let page = get(&format!("{base}/console/transfers"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    let csrf = page
        .split(r#"name="csrf" value=""#)
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(sign_out("http://evil.example", &csrf).await.unwrap().status(), 403);
    assert_eq!(sign_out(own, &csrf).await.unwrap().status(), StatusCode::SEE_OTHER);
    assert_eq!(
        get(&format!("{base}/console/transfers/live"), Some(&cookie))
            .await
            .status(),
        401
    );

    // A key without transfer:read sees no transfers.
    let cookie = sign_in(&base, &talker).await;
    let r = get(&format!("{base}/console/transfers"), Some(&cookie)).await;
    assert_eq!(r.status(), 403);
    assert!(!r.text().await.unwrap().contains(&t));
    assert_eq!(
        get(&format!("{base}/console/transfers/{t}/live"), Some(&cookie))
            .await
            .status(),
        403
    );

    // Revoking a key ends its sessions at once.
    let cookie = sign_in(&base, &reader).await;
    let out = Command::new(env!("CARGO_BIN_EXE_ahp"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["principal", "revoke", "watcher"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        get(&format!("{base}/console/transfers/live"), Some(&cookie))
            .await
            .status(),
        401
    );
}

#[tokio::test]
async fn a_person_watches_a_transfer_go_live_in_a_real_browser() {
    let Some(browser) = Browser::launch().await else { return };
    let dir = tempfile::tempdir().unwrap();
    register_forecaster(dir.path());
    let key = principal(dir.path(), "operator", &["transfer:read", "transfer:write"]);
    let server = serve(dir.path(), &[]);
    let base = base(&server);
    let t = pushed(dir.path(), "laptop-7", &key);
    let shots = screenshots();

    // Sign in.
    browser.goto(&format!("{base}/console")).await;
    browser.wait_for_path("/console/sign-in").await;
    browser.screenshot(&shots.join("sign-in.png")).await;
    browser.type_into("#key", &key).await;
    browser.click("form.signin button").await;
    browser.wait_for_path("/console/transfers").await;
    let listed = format!("return document.querySelector('tbody#live').textContent.includes('{t}')");
    assert_eq!(browser.eval(&listed).await, true);

    // Open the transfer; activate it over MCP and watch the page follow without a reload.
    browser.click(&format!("a[href='/console/transfers/{t}']")).await;
    browser
        .wait_for(
            "return document.querySelector('#status') !== null",
            Duration::from_secs(5),
        )
        .await;
    let count = "return Number(document.querySelector('#event-count').textContent.replace(/[()]/g, ''))";
    let before = browser.eval(count).await.as_u64().unwrap();
    assert_eq!(before, 3, "snapshot_created, runtime_provisioned, state_pushed");
    browser.eval("window.__notReloaded = true; return true").await;

    let activate = json!({"name": "activate", "arguments": {"transferId": t, "token": token(dir.path(), &t, TokenScope::Activate)}});
    let r = stateless(&server.url, Some(&key), "tools/call", Some("activate"), activate).await;
    let m = message(r).await;
    assert_eq!(m["result"]["structuredContent"]["status"], "active", "{m}");
    browser
        .wait_for(
            "return document.querySelector('#status').textContent.includes('active')",
            Duration::from_secs(10),
        )
        .await;
    assert!(browser.eval(count).await.as_u64().unwrap() > before);

    // Spend reported for the agent's model calls (as its orchestrator reports it: another
    // process, which does not carry the agent) extends the budget chart, one point per report.
    let points = "return Number(document.querySelector('svg.chart').dataset.points)";
    let drawn = browser.eval(points).await.as_u64().unwrap();
    assert!(drawn >= 2, "the budget's opening and the activation's compute");
    {
        let mut store = Store::open(dir.path().join("ahp.db")).unwrap();
        store.report_client_usage(&t, 12_000, "model").unwrap();
        store.report_client_usage(&t, 9_000, "model").unwrap();
    }
    browser
        .wait_for(&format!("{points} === {}", drawn + 2), Duration::from_secs(10))
        .await;
    let segments = "return document.querySelector('svg.chart polyline').getAttribute('points').split(' ').length";
    assert_eq!(browser.eval(segments).await.as_u64().unwrap(), 2 * (drawn + 2));
    assert_eq!(browser.eval("return window.__notReloaded === true").await, true);
    browser.screenshot(&shots.join("transfer.png")).await;

    browser.goto(&format!("{base}/console/transfers")).await;
    browser.screenshot(&shots.join("transfers.png")).await;

    // Sign out ends the session: the pages send the browser back to sign in.
    browser.click("form.signout button").await;
    browser.wait_for_path("/console/sign-in").await;
    browser.goto(&format!("{base}/console/transfers")).await;
    browser.wait_for_path("/console/sign-in").await;
}

#[tokio::test]
async fn a_key_without_the_console_s_scopes_gets_no_session() {
    let dir = tempfile::tempdir().unwrap();
    let meter = principal(dir.path(), "meter", &["transfer:meter"]);
    let mover = principal(dir.path(), "mover", &["transfer:write", "transfer:meter"]);
    let server = serve(dir.path(), &[]);
    let base = base(&server);
    for key in [meter, mover] {
        let r = client()
            .post(format!("{base}/console/sign-in"))
            .header("Origin", &base)
            .header("Content-Type", FORM)
            .body(form(&[("key", &key)]))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert!(r.headers().get("set-cookie").is_none(), "no session was started");
        assert!(r.text().await.unwrap().contains("holds none of the scopes"));
    }
}

/// Event ids in a transfer page's event log, in page order.
fn event_ids(page: &str) -> Vec<i64> {
    let log = page.split(r#"<table class="events">"#).nth(1).unwrap();
    log.split("<tr data-kind=")
        .skip(1)
        .map(|row| {
            row.split("<td>")
                .nth(1)
                .unwrap()
                .split('<')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect()
}

/// The `?before=` cursor of a page's "older events" link, if it has one.
fn older(page: &str) -> Option<String> {
    let link = page.split(r#"class="older" href=""#).nth(1)?;
    Some(
        link.split('"')
            .next()
            .unwrap()
            .split("before=")
            .nth(1)
            .unwrap()
            .to_owned(),
    )
}

#[tokio::test]
async fn a_long_event_log_is_paged_and_its_chart_stays_bounded() {
    use ahp_host::console::chart::CHART_POINTS;
    use ahp_host::console::pages::EVENTS_PER_PAGE;

    let dir = tempfile::tempdir().unwrap();
    let reader = principal(dir.path(), "watcher", &["transfer:read"]);
    let server = serve(dir.path(), &[]);
    let base = base(&server);
    let t = pushed(dir.path(), "laptop-7", &reader);
    let reports = 2 * CHART_POINTS;
    {
        // Active (spend is reported only then) without a sandbox: the log is what is read here.
        let key = TokenKey::from_env_or_file(dir.path()).unwrap();
        let mut store = Store::open(dir.path().join("ahp.db")).unwrap().with_token_key(key);
        store
            .begin_activation(&t, &token(dir.path(), &t, TokenScope::Activate))
            .unwrap();
        store.complete_activation(&t).unwrap();
        for _ in 0..reports {
            store.report_usage(&t, 1, "model").unwrap();
        }
    }
    let cookie = sign_in(&base, &reader).await;
    let page = get(&format!("{base}/console/transfers/{t}"), Some(&cookie))
        .await
        .text()
        .await
        .unwrap();
    // The newest page, and a chart downsampled to its bound that still ends at the spend.
    let ids = event_ids(&page);
    assert_eq!(ids.len(), EVENTS_PER_PAGE);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let points: usize = page
        .split(r#"data-points=""#)
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // The curve samples evenly spaced instants from the budget's opening to now, so how many
    // distinct points a burst of reports yields depends on how long the rest of the window
    // took (on a loaded machine, most instants fall before or after the burst): only the bound
    // is this test's (the sampling itself is unit-tested in `store/src/spend_curve.rs`).
    assert!((2..=CHART_POINTS).contains(&points), "{points}");
    assert!(
        page.contains(&format!("Spend $0.{reports:06} of")),
        "the curve ends at the spend"
    );
    assert!(page.len() < 64 * 1024, "{} bytes", page.len());

    // Older pages, one cursor at a time, cover the whole log exactly once.
    let mut seen = ids;
    let mut cursor = older(&page);
    while let Some(before) = cursor {
        let r = get(&format!("{base}/console/transfers/{t}?before={before}"), Some(&cookie)).await;
        assert_eq!(r.status(), 200);
        let page = r.text().await.unwrap();
        assert!(page.contains("Newest events"), "a way back to the newest");
        assert!(page.contains(&format!("/console/transfers/{t}/live?before={before}")));
        let ids = event_ids(&page);
        assert!(!ids.is_empty() && ids.len() <= EVENTS_PER_PAGE);
        assert!(*ids.last().unwrap() < seen[0], "older than the page before");
        seen.splice(0..0, ids);
        cursor = older(&page);
    }
    // Every event up to the newest one shown, each once (the server's tick may append later
    // ones meanwhile: it binds this transfer, activated behind its back, to its agent).
    let logged: Vec<i64> = Store::open(dir.path().join("ahp.db"))
        .unwrap()
        .get_status(&t)
        .unwrap()
        .events
        .iter()
        .map(|e| e.id)
        .filter(|id| id <= seen.last().unwrap())
        .collect();
    assert_eq!(seen, logged, "every event once");
    assert!(seen.len() > reports, "{} events shown", seen.len());
    // The live region of an older page is the same window.
    let live = get(
        &format!("{base}/console/transfers/{t}/live?before={}", seen[10]),
        Some(&cookie),
    )
    .await
    .text()
    .await
    .unwrap();
    assert_eq!(event_ids(&live), seen[..10]);

    // A cursor that is not an event id is a clear 400, on the page and its live region.
    for bad in ["abc", "0", "-5", "1.5", "99999999999999999999"] {
        for path in [format!("transfers/{t}"), format!("transfers/{t}/live")] {
            let r = get(&format!("{base}/console/{path}?before={bad}"), Some(&cookie)).await;
            assert_eq!(r.status(), 400, "{path}?before={bad}");
            assert!(r.text().await.unwrap().contains("is not an event id"));
        }
    }
}

#[tokio::test]
async fn another_key_s_transfer_is_not_listed_and_reads_exactly_like_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let owner = principal(dir.path(), "owner", &["transfer:read"]);
    let stranger = principal(dir.path(), "stranger", &["transfer:read"]);
    let server = serve(dir.path(), &[]);
    let base = base(&server);
    let t = pushed(dir.path(), "laptop-7", &owner);
    let missing = "tr_ffffffffffffffffffffffff";

    let mine = sign_in(&base, &owner).await;
    let listed = get(&format!("{base}/console/transfers"), Some(&mine)).await;
    assert!(listed.text().await.unwrap().contains(&t), "the owner sees its transfer");
    assert_eq!(
        get(&format!("{base}/console/transfers/{t}"), Some(&mine))
            .await
            .status(),
        200
    );

    let theirs = sign_in(&base, &stranger).await;
    for path in ["transfers", "transfers/live"] {
        let r = get(&format!("{base}/console/{path}"), Some(&theirs)).await;
        assert_eq!(r.status(), 200, "{path}");
        assert!(
            !r.text().await.unwrap().contains(&t),
            "{path} lists another key's transfer"
        );
    }
    for suffix in ["", "/live"] {
        let foreign = get(&format!("{base}/console/transfers/{t}{suffix}"), Some(&theirs)).await;
        let absent = get(&format!("{base}/console/transfers/{missing}{suffix}"), Some(&theirs)).await;
        assert_eq!(foreign.status(), 404, "{suffix}");
        assert_eq!(absent.status(), 404, "{suffix}");
        assert_eq!(foreign.text().await.unwrap(), absent.text().await.unwrap(), "{suffix}");
    }
}
