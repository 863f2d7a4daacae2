//! A `weir serve` child process for the CLI tests, and a way to run the
//! `weir` binary against it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_weir");

/// What one `weir` run printed, and its exit status.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A `weir args…` command (with `bootstrap` as --bootstrap-server when
/// given), stdout and stderr piped.
fn command(bootstrap: Option<&str>, args: &[&str], stdin: bool) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("WEIR_BOOTSTRAP_SERVER")
        .env_remove("WEIR_CONNECT_TIMEOUT_MS")
        .env_remove("RUST_LOG")
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(b) = bootstrap {
        cmd.env("WEIR_BOOTSTRAP_SERVER", b);
    }
    cmd
}

/// Runs `weir args…` (with `bootstrap` as --bootstrap-server when given)
/// and feeds it `stdin`.
pub fn weir(bootstrap: Option<&str>, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = command(bootstrap, args, stdin.is_some())
        .spawn()
        .expect("spawn weir");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        // A command that fails before reading stdin closes it: a broken
        // pipe here is expected then, and its exit status tells the rest.
        let _ = pipe.write_all(input.as_bytes());
    }
    output_of(child)
}

fn output_of(child: Child) -> Output {
    let out = child.wait_with_output().expect("wait for weir");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A `weir` command running in the background; killed on drop unless
/// waited for.
pub struct Running(Option<Child>);

impl Running {
    /// Waits for it to exit and returns what it printed.
    pub fn wait(mut self) -> Output {
        output_of(self.0.take().expect("not waited for yet"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A broker on a free port with its own data dir; killed on drop.
pub struct Broker {
    child: Child,
    pub addr: String,
    dir: tempfile::TempDir,
}

impl Broker {
    pub fn start() -> Broker {
        Self::start_with(&[])
    }

    /// A broker with extra `weir serve` arguments (e.g. `--set name=value`).
    pub fn start_with(extra: &[&str]) -> Broker {
        Self::start_in(None, extra)
    }

    /// A broker on the data directory `data` (to start one again on the
    /// data of a stopped one), else one in its temporary directory.
    pub fn start_in(data: Option<&Path>, extra: &[&str]) -> Broker {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = data.map_or_else(|| dir.path().join("data"), Path::to_path_buf);
        let log = std::fs::File::create(dir.path().join("broker.log")).expect("log file");
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            // Group joins complete at once instead of after Kafka's 3 s.
            .args(["--set", "group.initial.rebalance.delay.ms=0"])
            .args(extra)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn weir serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut addr = None;
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if let Some(a) = line.strip_prefix("weir: listening on ") {
                addr = Some(a.trim().to_string());
                break;
            }
        }
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.path().join("broker.log")).unwrap_or_default();
            panic!("weir serve did not report its address; its log:\n{log}");
        };
        // Keep reading so the broker never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Broker { child, addr, dir }
    }

    /// The temporary directory of this broker (the data dir is `data/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn run(&self, args: &[&str]) -> Output {
        weir(Some(&self.addr), args, None)
    }

    pub fn run_stdin(&self, args: &[&str], stdin: &str) -> Output {
        weir(Some(&self.addr), args, Some(stdin))
    }

    /// Starts `weir args…` against this broker without waiting for it.
    pub fn spawn(&self, args: &[&str]) -> Running {
        Running(Some(
            command(Some(&self.addr), args, false)
                .spawn()
                .expect("spawn weir"),
        ))
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A local port with no listener (bound, then released).
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
