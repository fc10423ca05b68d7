//! A minimal W3C WebDriver client for the console's browser tests: Debian's `chromedriver`
//! driving headless Chromium (`/usr/bin/chromium`), spoken to over plain HTTP with reqwest.
//!
//! [`Browser::launch`] returns `None` when no driver is installed, unless
//! `AHP_REQUIRE_BROWSER` is set (CI sets it after installing `chromium` and `chromium-driver`),
//! in which case a missing driver fails the test.

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// The W3C element reference key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A headless Chromium session, ended (and its driver killed) on drop.
pub(crate) struct Browser {
    http: reqwest::Client,
    session: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn find_program(candidates: &[&str]) -> Option<String> {
    candidates
        .iter()
        .find(|p| Path::new(p).is_file())
        .map(|p| (*p).to_owned())
}

impl Browser {
    /// Starts `chromedriver` and a headless Chromium session, or `None` if neither is
    /// installed and `AHP_REQUIRE_BROWSER` is unset.
    pub(crate) async fn launch() -> Option<Self> {
        let driver = find_program(&["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]);
        let chromium = find_program(&["/usr/bin/chromium", "/usr/bin/chromium-browser"]);
        let (Some(driver), Some(chromium)) = (driver, chromium) else {
            assert!(
                std::env::var_os("AHP_REQUIRE_BROWSER").is_none(),
                "AHP_REQUIRE_BROWSER is set but chromium/chromedriver are missing: apt-get install -y chromium chromium-driver"
            );
            // Straight to the process's stderr, past the harness's capture: a passing run says
            // what it skipped.
            let test = std::thread::current().name().unwrap_or("a browser test").to_owned();
            let _ = writeln!(
                std::io::stderr(),
                "skipped: {test}: needs chromium and chromedriver (apt-get install -y chromium chromium-driver)"
            );
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(r) = http.get(format!("{base}/status")).send().await
                && r.json::<Value>().await.is_ok_and(|v| v["value"]["ready"] == true)
            {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not become ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,1500",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let r: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {r}"));
        Some(Self {
            http,
            session: format!("{base}/session/{id}"),
            driver,
            _profile: profile,
        })
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let v: Value = req.send().await.unwrap().json().await.unwrap();
        if v["value"].get("error").is_some() {
            panic!("WebDriver {path}: {v}");
        }
        v["value"].clone()
    }

    /// Navigates to `url`.
    pub(crate) async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    async fn element(&self, css: &str) -> String {
        let v = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT].as_str().unwrap().to_owned()
    }

    /// Types `text` into the element `css` selects.
    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let e = self.element(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// Clicks the element `css` selects.
    pub(crate) async fn click(&self, css: &str) {
        let e = self.element(css).await;
        self.call(reqwest::Method::POST, &format!("/element/{e}/click"), Some(json!({})))
            .await;
    }

    /// Runs `script` in the page and returns its value.
    pub(crate) async fn eval(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Polls `script` until it returns `true`, for at most `within`.
    pub(crate) async fn wait_for(&self, script: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while self.eval(script).await != Value::Bool(true) {
            assert!(Instant::now() < deadline, "timed out waiting for: {script}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until the page's path is `path` (a click that submits a form may return before
    /// the navigation it starts has finished); fails naming where the browser is instead.
    pub(crate) async fn wait_for_path(&self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = self.eval("return location.pathname").await;
            if now == path {
                return;
            }
            if Instant::now() > deadline {
                let text = self.eval("return document.body.innerText").await;
                panic!("expected the browser at {path}, it is at {now}: {text}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a PNG screenshot of the page to `path`.
    pub(crate) async fn screenshot(&self, path: &Path) {
        let v = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}
