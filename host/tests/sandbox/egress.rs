//! A guest's HTTP through the host's egress: bounded, policy-checked, and cut at the turn's wall
//! clock whatever the server does; blocking waits end with the turn.

#[allow(unused_imports)]
use super::*;

/// A loopback HTTP/1.1 server that answers every request with `ok` and counts the requests
/// and the body bytes it received (content-length or chunked).
pub(super) struct Loopback {
    pub(super) url: String,
    pub(super) requests: Arc<std::sync::atomic::AtomicU64>,
    pub(super) body_bytes: Arc<std::sync::atomic::AtomicU64>,
    /// The `authorization` header of each request (empty if it had none).
    pub(super) authorizations: Arc<Mutex<Vec<String>>>,
}

pub(super) fn loopback() -> Loopback {
    loopback_seeing(|| {})
}

/// [`loopback`], calling `on_request` as each request arrives, before it answers.
pub(super) fn loopback_seeing(on_request: impl Fn() + Send + 'static) -> Loopback {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", listener.local_addr().unwrap().port());
    let requests = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let body_bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let authorizations = Arc::new(Mutex::new(Vec::new()));
    let (r, b, a) = (requests.clone(), body_bytes.clone(), authorizations.clone());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let (mut length, mut chunked, mut auth) = (0usize, false, String::new());
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                continue;
            }
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                chunked |= lower.starts_with("transfer-encoding:") && lower.contains("chunked");
                if lower.starts_with("authorization:") {
                    auth = line["authorization:".len()..].trim().to_owned();
                }
            }
            let mut got = 0usize;
            let mut sink = vec![0; 64 * 1024];
            if chunked {
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                    if size == 0 {
                        break;
                    }
                    let mut chunk = vec![0; size + 2];
                    if reader.read_exact(&mut chunk).is_err() {
                        break;
                    }
                    got += size;
                }
            } else {
                while got < length {
                    let n = reader.read(&mut sink[..(length - got).min(65536)]).unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    got += n;
                }
            }
            on_request();
            a.lock().unwrap().push(auth);
            r.fetch_add(1, Ordering::Relaxed);
            b.fetch_add(got as u64, Ordering::Relaxed);
            let mut conn = conn;
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    Loopback {
        url,
        requests,
        body_bytes,
        authorizations,
    }
}

pub(super) fn snapshot_for(server: &str) -> SnapshotInput {
    let mut s = snapshot(1, json!({}));
    s.mcp_config[0].server = server.to_owned();
    s
}

#[test]
pub(super) fn egress_flood() {
    use std::sync::atomic::Ordering;
    let server = loopback();
    let h = host();
    h.allow(json!([{ "server": server.url }]), true);
    let id = h.pushed(&snapshot_for(&server.url), Tier::Nano, 1_000_000, "egress-flood");
    let report = h.activate(&id);
    // The flood was cut off at the ceiling (the guest resumes only once it was).
    assert_eq!(report.outcome, RunOutcome::Returned);
    let ceiling = Tier::Nano.limits().egress_bytes;
    let breaches = h.events(&id, EventKind::CeilingExceeded);
    assert_eq!(breaches.len(), 1, "{breaches:?}");
    assert_eq!(breaches[0]["ceiling"], "egress_bytes");
    assert_eq!(breaches[0]["limit"], ceiling);
    let used = breaches[0]["usedBytes"].as_u64().unwrap();
    assert!(used <= ceiling && used > ceiling / 2, "counted {used} of {ceiling}");
    let received = server.body_bytes.load(Ordering::Relaxed);
    assert!(
        received <= ceiling,
        "the server received {received} bytes, past the {ceiling} ceiling"
    );
    assert!(server.requests.load(Ordering::Relaxed) >= 8);
    assert!(h.sandboxes.guest_log(&id).unwrap().contains("cut off after"));
    // A later turn gets no more: the ceiling is over the sandbox's life.
    // (The server counts the cut-off request when its connection closes: let it settle.)
    std::thread::sleep(Duration::from_millis(300));
    let before = server.requests.load(Ordering::Relaxed);
    h.run_call(&id).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(server.requests.load(Ordering::Relaxed), before);
    assert_eq!(
        h.events(&id, EventKind::CeilingExceeded).len(),
        1,
        "one breach, audited once"
    );
}

#[test]
pub(super) fn egress_denied() {
    use std::sync::atomic::Ordering;
    let server = loopback();
    let h = host();
    h.allow(json!([{ "server": server.url }]), true);
    let id = h.pushed(&snapshot_for(&server.url), Tier::Nano, 1_000_000, "egress-denied");
    let report = h.activate(&id);
    // The guest resumes only if example.com and `localhost` were refused and its own server
    // (named 127.0.0.1) answered.
    assert_eq!(report.outcome, RunOutcome::Returned, "{:?}", h.sandboxes.guest_log(&id));
    assert_eq!(server.requests.load(Ordering::Relaxed), 1);
    assert!(h.sandboxes.guest_log(&id).unwrap().contains("own server answered 200"));
}

/// The most a turn may take past its wall-clock ceiling: 10 % of it plus 100 ms.
pub(super) fn wall_clock_bound(tier: Tier) -> Duration {
    let ceiling = tier.limits().wall_clock_per_turn;
    ceiling + ceiling / 10 + Duration::from_millis(100)
}

impl Host {
    /// Activates the sleeper with `tool_state` under nano, which must be stopped by the
    /// wall-clock ceiling within its bound: the transfer back in `pushed`, the breach audited.
    pub(super) fn assert_wait_ends_with_the_turn(&self, snap: &SnapshotInput) {
        let id = self.pushed(snap, Tier::Nano, 1_000_000, "sleeper");
        let tok = testing::activate_token(&self.db(), &self.key, &id).unwrap();
        let started = std::time::Instant::now();
        let report = self.host.activate(&id, &tok).unwrap();
        let took = started.elapsed();
        let mode = &snap.tool_state["mode"];
        assert_eq!(
            report.outcome,
            RunOutcome::CeilingExceeded(Ceiling::WallClock),
            "{mode}: {:?}",
            self.sandboxes.guest_log(&id)
        );
        assert!(took <= wall_clock_bound(Tier::Nano), "{mode}: the turn took {took:?}");
        assert!(
            took >= Tier::Nano.limits().wall_clock_per_turn,
            "{mode}: ended early, {took:?}"
        );
        assert_eq!(report.transfer.status, TransferStatus::Pushed);
        assert!(!report.transfer.activating);
        let breaches = self.events(&id, EventKind::CeilingExceeded);
        assert_eq!(breaches.len(), 1, "{breaches:?}");
        assert_eq!(breaches[0]["ceiling"], "wall_clock_per_turn");
        assert_eq!(breaches[0]["limit"], 2_000);
        let failed = self.events(&id, EventKind::ActivationFailed);
        assert_eq!(failed[0]["reason"], "ceiling exceeded: wall_clock_per_turn");
        assert_eq!(self.sandboxes.live_count(), 0, "the sandbox is dropped");
    }
}

/// A loopback HTTP server that reads each request and then stalls: with `head`, after sending
/// a response head announcing 1,000 body bytes and 10 of them; without, before answering at
/// all. Connections stay open for a minute.
pub(super) fn stalling_server(head: bool) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", listener.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                    line.clear();
                }
                if head {
                    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n0123456789");
                }
                std::thread::sleep(Duration::from_secs(60));
            });
        }
    });
    url
}

#[test]
pub(super) fn sleeper() {
    let h = host();
    for mode in ["sleep", "poll", "block"] {
        h.assert_wait_ends_with_the_turn(&snapshot(0, json!({ "mode": mode })));
    }
    h.assert_serves_a_forecaster();
}

#[test]
pub(super) fn a_guest_blocked_on_a_stalled_response_body_ends_with_the_turn() {
    let h = host();
    let url = stalling_server(true);
    h.allow(json!([{ "server": url }]), true);
    let mut snap = snapshot_for(&url);
    snap.tool_state = json!({ "mode": "stream" });
    h.assert_wait_ends_with_the_turn(&snap);
    h.assert_serves_a_forecaster();
}

#[test]
pub(super) fn a_guest_waiting_for_http_responses_ends_with_the_turn() {
    let h = host();
    let url = stalling_server(false);
    h.allow(json!([{ "server": url }]), true);
    let mut snap = snapshot_for(&url);
    snap.tool_state = json!({ "mode": "http" });
    h.assert_wait_ends_with_the_turn(&snap);
    h.assert_serves_a_forecaster();
}

#[test]
pub(super) fn a_blocking_wait_on_a_later_turn_terminates_the_transfer() {
    let h = host();
    let started = std::time::Instant::now();
    h.assert_later_turn_terminates_with(
        &snapshot(0, json!({ "mode": "sleep", "resumeFirst": true })),
        "sleeper",
        Ceiling::WallClock,
    );
    // Two activations and a forecaster besides the blocked turn.
    assert!(started.elapsed() < wall_clock_bound(Tier::Nano) + Duration::from_secs(2));
}

/// Whether the prober's `log` says its GET of `url` was refused with the error `code`.
pub(super) fn refused_with(log: &str, url: &str, code: &str) -> bool {
    log.lines()
        .any(|l| l.starts_with(&format!("GET {url} -> refused: ")) && l.contains(code))
}

/// A snapshot listing `servers` as `(url, credRef)`.
pub(super) fn snapshot_with(servers: &[(&str, &str)]) -> SnapshotInput {
    let mut s = snapshot(0, json!({}));
    s.mcp_config = servers
        .iter()
        .map(|(server, cred_ref)| ahp_host::store::McpServer {
            server: (*server).to_owned(),
            cred_ref: (*cred_ref).to_owned(),
        })
        .collect();
    s
}

impl Host {
    /// Runs the egress prober over `snap` and returns its log (it always resumes).
    pub(super) fn probe(&self, snap: &SnapshotInput) -> (String, String) {
        let id = self.pushed(snap, Tier::Nano, 1_000_000, "egress-prober");
        let report = self.activate(&id);
        assert_eq!(report.outcome, RunOutcome::Returned);
        let log = self.sandboxes.guest_log(&id).unwrap();
        assert!(self.sandboxes.drop_sandbox(&id));
        (id, log)
    }
}

#[test]
pub(super) fn egress_prober() {
    // Metadata, loopback (by address and by name) and private destinations are refused by
    // default, on the address the name resolves to — even though the policy lists each server.
    use std::sync::atomic::Ordering;
    let server = loopback();
    let port = server
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let by_name = format!("http://localhost:{port}/mcp");
    let targets = [
        "http://169.254.169.254/latest/meta-data",
        server.url.as_str(),
        by_name.as_str(),
        "http://10.0.0.1/mcp",
        "http://192.168.1.1/mcp",
        "http://[::1]:9/mcp",
    ];
    let h = host();
    let rules: Vec<Value> = targets.iter().map(|t| json!({ "server": t })).collect();
    h.allow(Value::Array(rules), false);
    let snap = snapshot_with(&targets.map(|t| (t, "inventory-api")));
    let (_, log) = h.probe(&snap);
    for t in targets {
        assert!(refused_with(&log, t, "DestinationIpProhibited"), "{t}: {log}");
    }
    assert_eq!(
        server.requests.load(Ordering::Relaxed),
        0,
        "nothing reached the loopback server"
    );
}
