//! `weir dev cluster`: child `weir serve` nodes on loopback, a bootstrap
//! line naming each, ports kept across restarts on one data dir, and every
//! child gone after SIGTERM.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_weir");

/// How long a cluster may take to print its bootstrap line.
const START_DEADLINE: Duration = Duration::from_secs(90);
/// How long `weir dev cluster` may take to stop after SIGTERM.
const STOP_DEADLINE: Duration = Duration::from_secs(60);

/// Settings for quick broker sessions in tests.
pub const FAST_SESSIONS: &[&str] = &[
    "--set",
    "broker.heartbeat.interval.ms=200",
    "--set",
    "broker.session.timeout.ms=3000",
];

/// A running `weir dev cluster`; on drop it gets SIGTERM, and SIGKILL
/// (it and its nodes) if it has not stopped by the deadline.
pub struct DevCluster {
    child: Option<Child>,
    /// The `bootstrap:` line's addresses, comma-separated.
    pub bootstrap: String,
    /// The `controllers:` line's addresses, comma-separated.
    pub controllers: String,
    /// Process id of each node, node 1 first.
    pub pids: Vec<u32>,
    stderr: PathBuf,
    lines: Receiver<String>,
}

/// What a stopped `weir dev cluster` left.
pub struct Stopped {
    pub status: ExitStatus,
    pub stderr: String,
}

impl DevCluster {
    /// Starts `weir dev cluster --nodes n --data-dir data_dir extra…` and
    /// waits for its bootstrap and controllers lines.
    pub fn start(nodes: usize, data_dir: &Path, extra: &[&str]) -> DevCluster {
        let stderr = data_dir.with_extension("dev-cluster.stderr");
        let mut child = Command::new(BIN)
            .args([
                "dev",
                "cluster",
                "--nodes",
                &nodes.to_string(),
                "--data-dir",
            ])
            .arg(data_dir)
            .args(extra)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(&stderr).expect("stderr file"),
            ))
            .spawn()
            .expect("spawn weir dev cluster");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut cluster = DevCluster {
            child: Some(child),
            bootstrap: String::new(),
            controllers: String::new(),
            pids: Vec::new(),
            stderr,
            lines,
        };
        let deadline = Instant::now() + START_DEADLINE;
        while cluster.controllers.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match cluster.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "no controllers line within {START_DEADLINE:?}: {}",
                        cluster.err()
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!(
                        "weir dev cluster exited before its controllers line: {}",
                        cluster.err()
                    )
                }
            };
            if let Some(b) = line.strip_prefix("bootstrap: ") {
                cluster.bootstrap = b.to_string();
            } else if let Some(c) = line.strip_prefix("controllers: ") {
                cluster.controllers = c.to_string();
            } else if line.starts_with("node ") {
                let pid = line
                    .split_whitespace()
                    .find_map(|f| f.strip_prefix("pid="))
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| panic!("no pid in {line:?}"));
                cluster.pids.push(pid);
            }
        }
        cluster
    }

    fn err(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Sends SIGTERM and waits (bounded) for the command to exit.
    pub fn stop(self) -> Stopped {
        self.stop_with("-TERM")
    }

    /// Sends `sig` (a kill(1) option) and waits (bounded) for the command
    /// to exit.
    pub fn stop_with(self, sig: &str) -> Stopped {
        signal(self.child.as_ref().expect("running").id(), sig);
        self.wait()
    }

    /// Waits (bounded) for the command to exit.
    pub fn wait(mut self) -> Stopped {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + STOP_DEADLINE;
        let status = loop {
            if let Some(s) = child.try_wait().expect("try_wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                for pid in &self.pids {
                    signal(*pid, "-KILL");
                }
                panic!(
                    "weir dev cluster did not stop within {STOP_DEADLINE:?}: {}",
                    self.err()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Stopped {
            status,
            stderr: self.err(),
        }
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        signal(child.id(), "-TERM");
        let deadline = Instant::now() + STOP_DEADLINE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        for pid in &self.pids {
            signal(*pid, "-KILL");
        }
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Whether a process with this id exists (a zombie counts: it was not
/// reaped).
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn three_nodes_print_a_bootstrap_line_and_all_stop_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(3, &dir.path().join("c"), FAST_SESSIONS);
    let addrs: Vec<&str> = cluster.bootstrap.split(',').collect();
    assert_eq!(addrs.len(), 3, "bootstrap: {}", cluster.bootstrap);
    for a in &addrs {
        assert!(a.starts_with("127.0.0.1:"), "{a}");
        TcpStream::connect(a).unwrap_or_else(|e| panic!("client listener {a}: {e}"));
    }
    assert_eq!(cluster.controllers.split(',').count(), 3);
    assert_eq!(cluster.pids.len(), 3);
    let pids = cluster.pids.clone();
    for pid in &pids {
        assert!(alive(*pid), "node pid {pid} not running");
    }
    let stopped = cluster.stop();
    assert!(
        stopped.status.success(),
        "{}: {}",
        stopped.status,
        stopped.stderr
    );
    assert!(
        stopped.stderr.contains("all nodes stopped"),
        "{}",
        stopped.stderr
    );
    let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    for pid in &left {
        signal(*pid, "-KILL");
    }
    assert!(left.is_empty(), "node pids {left:?} still exist after stop");
    for id in 1..=3 {
        let log = dir.path().join(format!("c/node-{id}.log"));
        assert!(log.exists(), "no {}", log.display());
        assert!(dir.path().join(format!("c/node-{id}")).is_dir());
    }
}

#[test]
fn a_restart_on_the_same_data_dir_keeps_the_ports() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("c");
    let first = DevCluster::start(1, &data, &[]);
    let (bootstrap, controllers) = (first.bootstrap.clone(), first.controllers.clone());
    let stopped = first.stop();
    assert!(stopped.status.success(), "{}", stopped.stderr);

    let again = DevCluster::start(1, &data, &[]);
    assert_eq!(again.bootstrap, bootstrap);
    assert_eq!(again.controllers, controllers);
    // Another node count on the same data dir is refused.
    drop(again);
    let out = Command::new(BIN)
        .args(["dev", "cluster", "--nodes", "2", "--data-dir"])
        .arg(&data)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds a cluster of 1 nodes"), "{err}");
}

#[test]
fn sigint_stops_the_nodes_too() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(1, &dir.path().join("c"), &[]);
    let pid = cluster.pids[0];
    let stopped = cluster.stop_with("-INT");
    assert!(stopped.status.success(), "{}", stopped.stderr);
    assert!(stopped.stderr.contains("SIGINT"), "{}", stopped.stderr);
    assert!(!alive(pid), "node pid {pid} still exists");
}

#[test]
fn a_node_killed_while_running_stops_the_others_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(3, &dir.path().join("c"), FAST_SESSIONS);
    let pids = cluster.pids.clone();
    signal(pids[1], "-KILL");
    let stopped = cluster.wait();
    assert_eq!(stopped.status.code(), Some(1), "{}", stopped.stderr);
    assert!(
        stopped.stderr.contains("error: node 2 exited: signal: 9"),
        "{}",
        stopped.stderr
    );
    assert!(
        stopped.stderr.contains("node-2.log ---"),
        "{}",
        stopped.stderr
    );
    let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    for pid in &left {
        signal(*pid, "-KILL");
    }
    assert!(left.is_empty(), "node pids {left:?} still exist");
}

#[test]
fn a_node_that_fails_to_start_stops_the_cluster_and_shows_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["dev", "cluster", "--nodes", "2", "--data-dir"])
        .arg(dir.path().join("c"))
        .args(["--set", "num.partitions=many"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error: node "), "{err}");
    // The log tail names the bad setting.
    assert!(err.contains("num.partitions"), "{err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("bootstrap:"),
        "a failed cluster printed a bootstrap line"
    );
}

#[test]
fn settings_the_dev_cluster_owns_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["dev", "cluster", "--data-dir"])
        .arg(dir.path().join("c"))
        .args(["--set", "listeners=PLAINTEXT://127.0.0.1:9092"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: --set listeners is not allowed"),
        "{err}"
    );
}
