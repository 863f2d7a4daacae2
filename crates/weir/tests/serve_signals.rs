//! `weir serve` stops cleanly on SIGTERM or SIGINT sent the moment it
//! prints its listening line (what a supervisor or a test harness does):
//! exit status 0 and the clean-shutdown marker, never death by the signal.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_weir");

fn stop_right_after_start(signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .args(["--set", "http.listeners="])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let listening = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.starts_with("weir: listening on "));
    assert!(listening, "no listening line");
    let sent = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    std::thread::spawn(move || for _ in lines {});
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "weir serve did not stop within 30 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{signal} right after start: {status}");
    assert!(
        data.join(".kafka_cleanshutdown").exists(),
        "{signal}: no clean shutdown marker"
    );
}

#[test]
fn sigterm_right_after_the_listening_line_stops_cleanly() {
    for _ in 0..20 {
        stop_right_after_start("-TERM");
    }
}

#[test]
fn sigint_right_after_the_listening_line_stops_cleanly() {
    stop_right_after_start("-INT");
}
