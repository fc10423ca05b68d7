//! Peak resident memory of a probe run alone: a test runs one ignored probe of its own binary
//! in a child process (so no other test's memory counts), the probe resets the peak, does its
//! work and prints what it measured, and the test reads the figures back.

#![allow(dead_code)]

/// `field` of `/proc/self/status` (`VmRSS:`, `VmHWM:`), in bytes.
pub(crate) fn proc_status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Resets the peak (`VmHWM`) to the current resident memory, and returns that.
pub(crate) fn reset_peak() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    proc_status_bytes("VmRSS:")
}

/// The peak resident memory since [`reset_peak`].
pub(crate) fn peak() -> u64 {
    proc_status_bytes("VmHWM:")
}

/// Runs the ignored test `probe` of this binary alone in a child process and returns its
/// standard output, once it succeeded.
pub(crate) fn run_probe(probe: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([probe, "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The number a probe printed after `key` (libtest may print it after its own `test … `).
pub(crate) fn probe_value(stdout: &str, key: &str) -> u64 {
    let rest = stdout
        .split(key)
        .nth(1)
        .unwrap_or_else(|| panic!("no {key} in {stdout}"));
    rest.chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}
