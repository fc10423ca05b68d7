//! The real `ahp serve --http` for the benchmarks that measure over HTTP: the CLI run on a data
//! directory, and the server started on a free loopback port and killed when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running `ahp serve`, killed and reaped when dropped.
pub(crate) struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn command(dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ahp"));
    c.envs(env.iter().copied()).arg("--data-dir").arg(dir);
    c
}

/// `ahp --data-dir DIR ARGS…` with `env`; its standard output, trimmed (panics if it fails).
pub(crate) fn ahp(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
    let out = command(dir, env).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `ahp serve --http 127.0.0.1:0 EXTRA…` on `dir` with `env`, once it listens: the server and its
/// `/mcp` URL.
pub(crate) fn serve(dir: &Path, env: &[(&str, &str)], extra: &[&str]) -> (Server, String) {
    let mut child = command(dir, env)
        .env("RUST_LOG", "warn")
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("MCP over HTTP at") {
        line.clear();
        assert_ne!(stderr.read_line(&mut line).unwrap(), 0, "the server exited");
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (Server(child), line.trim().rsplit(' ').next().unwrap().to_owned())
}
