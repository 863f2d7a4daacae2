//! Test support for running real Kafka clients against a `weir serve` process.
//!
//! Nothing here mocks the broker: [`WeirProcess`] spawns the real `weir`
//! binary on an ephemeral loopback port with a temporary data directory, and
//! the integration tests in `tests/` drive it with independent client
//! implementations (kcat/librdkafka, the `rdkafka` crate, kafka-python,
//! kafkajs).
//!
//! ```no_run
//! use weir_compat_tests::WeirProcess;
//!
//! let broker = WeirProcess::start().expect("weir starts");
//! println!("bootstrap servers: {}", broker.bootstrap());
//! // ... run a client against broker.bootstrap() ...
//! drop(broker); // kills the process and removes the data dir
//! ```
//!
//! Where the `weir` binary comes from: `WEIR_BIN` if set; otherwise
//! `target/<profile>/weir` beside the test executable's `deps/` directory;
//! otherwise it is built once with `cargo build -p weir` into a separate
//! target directory (so the outer `cargo test` lock is not waited on).

use std::ffi::OsStr;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

pub mod cluster;
pub mod jepsen;
pub mod murmur2;
pub mod netns;
pub mod segment;
pub mod tools;

pub use murmur2::{murmur2, partition_for_key};

/// Prefix of the line `weir serve` prints on stdout once its listener is bound.
pub const LISTENING_PREFIX: &str = "weir: listening on ";
/// Prefix of the line that names the metrics endpoint (`http://HOST:PORT/metrics`).
const METRICS_PREFIX: &str = "weir: metrics http://";
/// Prefix of the line printed instead when the HTTP listener is off.
const METRICS_OFF_PREFIX: &str = "weir: metrics and console off";

/// Default time to wait for the listening line (override: `WEIR_START_TIMEOUT_SECS`).
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(60);

/// Time allowed for a clean shutdown after SIGTERM before the process is killed.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// Errors of the test harness. Each message says what the broker did wrong,
/// so a failing test reads as a diagnosis.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("cannot find or build the weir binary: {reason}")]
    NoBinary { reason: String },
    #[error("cannot create a temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
    #[error("cannot spawn {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "weir exited ({status}) before printing `{LISTENING_PREFIX}HOST:PORT`\n--- weir stdout ---\n{stdout}\n--- weir stderr (tail) ---\n{stderr}"
    )]
    ExitedEarly {
        status: ExitStatus,
        stdout: String,
        stderr: String,
    },
    #[error(
        "weir did not print `{LISTENING_PREFIX}HOST:PORT` within {timeout:?}\n--- weir stdout ---\n{stdout}\n--- weir stderr (tail) ---\n{stderr}"
    )]
    StartTimeout {
        timeout: Duration,
        stdout: String,
        stderr: String,
    },
    #[error("weir printed a malformed listening line: {line:?}")]
    BadListeningLine { line: String },
    #[error(
        "weir did not exit within {timeout:?} after SIGTERM (killed)\n--- weir stderr (tail) ---\n{stderr}"
    )]
    ShutdownTimeout { timeout: Duration, stderr: String },
    #[error(
        "weir exited with {status} after SIGTERM (expected a clean exit)\n--- weir stderr (tail) ---\n{stderr}"
    )]
    UncleanShutdown { status: ExitStatus, stderr: String },
    #[error("i/o error talking to the weir process: {0}")]
    Io(#[from] std::io::Error),
}

/// A running `weir serve` process with its own temporary data directory.
///
/// Invariant: while `child` is `Some`, the process was seen printing its
/// listening line and `bootstrap` is the address it printed. The process is
/// killed when this value is dropped; the data directory is removed after it.
pub struct WeirProcess {
    child: Option<Child>,
    bin: PathBuf,
    start_timeout: Duration,
    bootstrap: String,
    extra_args: Vec<String>,
    // Field order matters: the log dir and data dir are removed after the
    // process is killed in `Drop`.
    stderr_path: PathBuf,
    starts: u32,
    /// `host:port` of the metrics/console listener, when `http.listeners`
    /// gave the process one (see [`metrics`](Self::metrics)).
    http: Option<String>,
    _log_dir: tempfile::TempDir,
    data_dir: tempfile::TempDir,
}

impl WeirProcess {
    /// Start `weir serve --listen 127.0.0.1:0 --data-dir <temp>`.
    pub fn start() -> Result<Self, HarnessError> {
        Self::start_with_args(&[])
    }

    /// Start with extra command-line arguments (e.g. `["--set", "num.partitions=3"]`).
    pub fn start_with_args(extra_args: &[&str]) -> Result<Self, HarnessError> {
        Self::start_binary(weir_binary()?, extra_args)
    }

    /// Start a specific binary as `BIN serve --listen 127.0.0.1:0 --data-dir <temp> ARGS…`.
    pub fn start_binary(bin: PathBuf, extra_args: &[&str]) -> Result<Self, HarnessError> {
        Self::start_inner(bin, extra_args, start_timeout())
    }

    fn start_inner(
        bin: PathBuf,
        extra_args: &[&str],
        start_timeout: Duration,
    ) -> Result<Self, HarnessError> {
        let data_dir = tempfile::Builder::new()
            .prefix("weir-compat-data-")
            .tempdir()
            .map_err(HarnessError::TempDir)?;
        let log_dir = tempfile::Builder::new()
            .prefix("weir-compat-log-")
            .tempdir()
            .map_err(HarnessError::TempDir)?;
        let mut process = WeirProcess {
            child: None,
            bin,
            start_timeout,
            bootstrap: String::new(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            stderr_path: log_dir.path().join("weir-0.stderr"),
            starts: 0,
            http: None,
            _log_dir: log_dir,
            data_dir,
        };
        process.spawn()?;
        Ok(process)
    }

    /// `host:port` for a client's bootstrap servers setting.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The broker's Prometheus metrics text (`GET /metrics`). The process
    /// must have an HTTP listener: start it with
    /// `--set http.listeners=127.0.0.1:0`.
    pub fn metrics(&self) -> Result<String, HarnessError> {
        use std::io::Write;
        let Some(http) = &self.http else {
            return Err(HarnessError::Io(std::io::Error::other(
                "this broker has no HTTP listener (start it with --set http.listeners=127.0.0.1:0)",
            )));
        };
        let mut stream = std::net::TcpStream::connect(http)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\n\r\n"
        )?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        match response.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
            _ => Err(HarnessError::Io(std::io::Error::other(format!(
                "GET /metrics: unexpected response: {}",
                response.lines().next().unwrap_or("")
            )))),
        }
    }

    /// The sum of the samples of metric `name` whose labels include every
    /// `(label, value)` pair given (0 when there is none).
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Result<f64, HarnessError> {
        Ok(sum_samples(&self.metrics()?, name, labels))
    }

    /// The broker's data directory (`log.dirs`).
    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }

    /// The OS process id of the running broker, if running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The last few KiB of the broker's stderr (its log), for diagnostics.
    pub fn stderr_tail(&self) -> String {
        tail_of_file(&self.stderr_path, 16 * 1024)
    }

    /// The bound address of listener `name` (as in `listeners`, e.g.
    /// `SASL_SSL`) of the running process, from its log line
    /// `listening addr=<a> listener=<name> …`: with several listeners on
    /// port 0, [`bootstrap`](Self::bootstrap) names only the first.
    pub fn listener_addr(&self, name: &str) -> Option<std::net::SocketAddr> {
        let log = std::fs::read_to_string(&self.stderr_path).ok()?;
        listener_addr_in_log(&log, name)
    }

    /// `Some(status)` if the broker process has exited on its own.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Send SIGTERM, wait for a clean exit, and start again on the same data
    /// directory. The new process may listen on a different port: use
    /// [`bootstrap`](Self::bootstrap) again afterwards.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        self.stop()?;
        self.spawn()
    }

    /// Kill the broker with SIGKILL (no shutdown of any kind, like a crash or
    /// `kill -9`) and reap it. [`restart`](Self::restart) starts it again on
    /// the same data directory.
    pub fn kill_hard(&mut self) -> Result<(), HarnessError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // `Child::kill` sends SIGKILL on Unix.
        child.kill()?;
        let status = child.wait()?;
        if status.success() {
            return Err(HarnessError::UncleanShutdown {
                status,
                stderr: format!(
                    "the broker exited cleanly before SIGKILL reached it\n{}",
                    self.stderr_tail()
                ),
            });
        }
        Ok(())
    }

    /// Send SIGTERM and wait (bounded) for the process to exit with success.
    pub fn stop(&mut self) -> Result<(), HarnessError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        send_sigterm(&child);
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                if status.success() {
                    return Ok(());
                }
                return Err(HarnessError::UncleanShutdown {
                    status,
                    stderr: self.stderr_tail(),
                });
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HarnessError::ShutdownTimeout {
                    timeout: SHUTDOWN_TIMEOUT,
                    stderr: self.stderr_tail(),
                });
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn spawn(&mut self) -> Result<(), HarnessError> {
        let bin = self.bin.clone();
        self.stderr_path = self
            ._log_dir
            .path()
            .join(format!("weir-{}.stderr", self.starts));
        self.starts += 1;
        self.bootstrap.clear();
        self.http = None;
        let stderr_file = File::create(&self.stderr_path)?;
        let mut command = Command::new(&bin);
        command
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(self.data_dir.path())
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr_file));
        // WEIR_* variables are broker configuration; the test knobs
        // (WEIR_BIN, WEIR_COMPAT_*, ...) must not leak into it.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("WEIR_") {
                command.env_remove(&key);
            }
        }
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "info");
        }
        let mut child = command.spawn().map_err(|source| HarnessError::Spawn {
            program: bin.display().to_string(),
            source,
        })?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HarnessError::Io(std::io::Error::other(
                "child stdout was not captured",
            )));
        };
        let lines = spawn_line_reader(stdout);
        let timeout = self.start_timeout;
        let deadline = Instant::now() + timeout;
        let mut seen = String::new();
        loop {
            let now = Instant::now();
            let wait = deadline
                .saturating_duration_since(now)
                .min(Duration::from_millis(100));
            match lines.recv_timeout(wait) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix(LISTENING_PREFIX) {
                        let addr = addr.trim();
                        if !is_host_port(addr) {
                            let _ = child.kill();
                            let _ = child.wait();
                            return Err(HarnessError::BadListeningLine { line });
                        }
                        self.bootstrap = addr.to_string();
                        // The metrics line follows within the same flush.
                        continue;
                    }
                    if !self.bootstrap.is_empty() {
                        if let Some(url) = line.strip_prefix(METRICS_PREFIX) {
                            self.http = url.trim().strip_suffix("/metrics").map(str::to_string);
                            self.child = Some(child);
                            return Ok(());
                        }
                        if line.starts_with(METRICS_OFF_PREFIX) {
                            self.http = None;
                            self.child = Some(child);
                            return Ok(());
                        }
                    }
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(RecvTimeoutError::Disconnected) => {
                    // stdout closed: the process is most likely exiting; the
                    // status check below reports it (or the deadline does).
                    thread::sleep(wait);
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if let Some(status) = child.try_wait()? {
                return Err(HarnessError::ExitedEarly {
                    status,
                    stdout: seen,
                    stderr: self.stderr_tail(),
                });
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HarnessError::StartTimeout {
                    timeout,
                    stdout: seen,
                    stderr: self.stderr_tail(),
                });
            }
        }
    }
}

impl Drop for WeirProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl std::fmt::Debug for WeirProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeirProcess")
            .field("pid", &self.pid())
            .field("bootstrap", &self.bootstrap)
            .field("data_dir", &self.data_dir.path())
            .finish()
    }
}

/// Finds `listening addr=<a> listener=<name> ` in a broker log (terminal
/// colours stripped); the last such line, since a log may span restarts.
fn listener_addr_in_log(log: &str, name: &str) -> Option<std::net::SocketAddr> {
    let mut plain = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    let needle = format!("listener={name} ");
    plain.lines().rev().find_map(|l| {
        if !l.contains("listening") || !l.contains(&needle) {
            return None;
        }
        l.split("addr=")
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

fn start_timeout() -> Duration {
    std::env::var("WEIR_START_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_START_TIMEOUT)
}

fn is_host_port(addr: &str) -> bool {
    match addr.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0),
        None => false,
    }
}

/// Read lines from `source` on a thread; the channel closes at EOF. The
/// thread keeps draining after the receiver is gone so the child never
/// blocks on a full pipe.
fn spawn_line_reader<R: Read + Send + 'static>(source: R) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let reader = BufReader::new(source);
        for line in reader.lines() {
            let Ok(line) = line else { break };
            // A closed receiver is fine: keep reading to drain the pipe.
            let _ = tx.send(line);
        }
    });
    rx
}

fn tail_of_file(path: &Path, max: usize) -> String {
    let Ok(bytes) = std::fs::read(path) else {
        return String::from("(no stderr captured)");
    };
    let start = bytes.len().saturating_sub(max);
    let text = String::from_utf8_lossy(&bytes[start..]);
    if start > 0 {
        format!("[... {start} bytes omitted ...]\n{text}")
    } else {
        text.into_owned()
    }
}

/// Ask the process to shut down cleanly.
#[allow(unsafe_code)]
fn send_sigterm(child: &Child) {
    let Ok(pid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers and touches no memory of ours. The
    // pid is that of our own child, which has not been reaped yet (we hold the
    // `Child` and have not waited on it), so it cannot name another process.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
}

/// Path of the `weir` binary to test (see the crate docs for the search order).
pub fn weir_binary() -> Result<PathBuf, HarnessError> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(find_or_build_weir)
        .clone()
        .map_err(|reason| HarnessError::NoBinary { reason })
}

fn find_or_build_weir() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("WEIR_BIN") {
        let bin = PathBuf::from(bin);
        return if bin.is_file() {
            Ok(bin)
        } else {
            Err(format!("WEIR_BIN={} is not a file", bin.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    // .../target/<profile>/deps/<test-exe>  ->  .../target/<profile>/weir
    let profile_dir = exe
        .parent()
        .filter(|d| d.file_name() == Some(OsStr::new("deps")))
        .and_then(Path::parent);
    if let Some(dir) = profile_dir {
        let candidate = dir.join("weir");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    // Build it. The outer `cargo test` holds the lock on its own target dir
    // while tests run, so build into a separate one.
    let workspace = workspace_root();
    let target = profile_dir
        .and_then(Path::parent)
        .map(|t| t.join("compat-weir-build"))
        .unwrap_or_else(|| workspace.join("target").join("compat-weir-build"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "weir-compat-tests: no weir binary found; running `cargo build -p weir --target-dir {}` (set WEIR_BIN to skip)",
        target.display()
    );
    let status = Command::new(&cargo)
        .current_dir(&workspace)
        .args(["build", "-p", "weir", "--target-dir"])
        .arg(&target)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo build -p weir` failed: {status}"));
    }
    let built = target.join("debug").join("weir");
    if built.is_file() {
        Ok(built)
    } else {
        Err(format!(
            "cargo build succeeded but {} is missing",
            built.display()
        ))
    }
}

pub use weir_test_support::{in_ci, scaled, skip_or_fail, soak, workspace_root};

/// Output of a command run with a time limit.
#[derive(Debug)]
pub struct CommandOutput {
    /// `None` if the command was killed for exceeding its time limit.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl CommandOutput {
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// A readable report of what happened, for assertion messages.
    pub fn describe(&self, what: &str) -> String {
        let status = match self.status {
            Some(s) => s.to_string(),
            None => String::from("KILLED after exceeding its time limit"),
        };
        format!(
            "{what}: {status} after {:.1?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Asserts that a check script (one `PASS …` / `FAIL …` line per check)
/// exited 0, reported at least one pass and no failure; on failure the
/// message carries the script's output and the broker's log tail.
pub fn assert_checks_passed(out: &CommandOutput, broker: &WeirProcess, script: &str) {
    let passes = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("PASS "))
        .count();
    let fails: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL "))
        .collect();
    assert!(
        out.success() && fails.is_empty() && passes > 0,
        "{script}: checks failed ({passes} passed):\n{}\n\n{}\n--- weir stderr (tail) ---\n{}",
        fails.join("\n"),
        out.describe(script),
        broker.stderr_tail()
    );
}

/// Run `command` with optional stdin bytes, capturing output, killing it
/// after `limit`. Never hangs longer than `limit` plus a moment.
pub fn run_with_timeout(
    command: &mut Command,
    stdin: Option<&[u8]>,
    limit: Duration,
) -> Result<CommandOutput, HarnessError> {
    let started = Instant::now();
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let program = format!("{:?}", command.get_program());
    let mut child = command
        .spawn()
        .map_err(|source| HarnessError::Spawn { program, source })?;
    let stdin_thread = match (stdin, child.stdin.take()) {
        (Some(bytes), Some(mut pipe)) => {
            let bytes = bytes.to_vec();
            Some(thread::spawn(move || {
                use std::io::Write;
                // A child that exits early closes the pipe; that is reported
                // through its exit status, not here.
                let _ = pipe.write_all(&bytes);
            }))
        }
        _ => None,
    };
    let out = child.stdout.take().map(spawn_reader);
    let err = child.stderr.take().map(spawn_reader);
    let deadline = started + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    if let Some(t) = stdin_thread {
        let _ = t.join();
    }
    let stdout = out
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    let stderr = err
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    Ok(CommandOutput {
        status,
        stdout,
        stderr,
        elapsed: started.elapsed(),
    })
}

fn spawn_reader<R: Read + Send + 'static>(mut source: R) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = source.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Read a count from the environment (e.g. `WEIR_COMPAT_RECORDS`), else `default`.
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// Time limit for one client script run (`WEIR_COMPAT_CLIENT_TIMEOUT_SECS`, default 300 s).
pub fn client_timeout() -> Duration {
    Duration::from_secs(env_count("WEIR_COMPAT_CLIENT_TIMEOUT_SECS", 300) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for the weir binary: a shell script with the given body.
    fn fake_weir(dir: &Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("fake-weir");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write script");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    #[test]
    fn start_reads_the_listening_line_and_restart_reuses_the_data_dir() {
        let dir = tempfile::tempdir().expect("tempdir");
        // $5 is the data dir: serve --listen 127.0.0.1:0 --data-dir DIR
        let bin = fake_weir(
            dir.path(),
            r#"trap 'echo stopped >> "$5/events"; exit 0' TERM
echo "starting" 
echo started >> "$5/events"
echo "weir: listening on 127.0.0.1:4242"
echo "weir: data dir $5"
echo "weir: metrics http://127.0.0.1:4243/metrics"
while true; do sleep 0.05; done"#,
        );
        let mut p = WeirProcess::start_inner(bin, &[], Duration::from_secs(30)).expect("starts");
        assert_eq!(p.bootstrap(), "127.0.0.1:4242");
        assert_eq!(p.http.as_deref(), Some("127.0.0.1:4243"));
        let data_dir = p.data_dir().to_path_buf();
        p.restart().expect("restarts");
        assert_eq!(p.data_dir(), data_dir);
        p.stop().expect("stops cleanly");
        let events = std::fs::read_to_string(data_dir.join("events")).expect("events");
        assert_eq!(events, "started\nstopped\nstarted\nstopped\n");
    }

    #[test]
    fn a_process_that_exits_early_is_reported_with_its_output() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = fake_weir(dir.path(), "echo 'bad config' >&2; echo hello; exit 2");
        let err = WeirProcess::start_inner(bin, &[], Duration::from_secs(30)).expect_err("fails");
        match err {
            HarnessError::ExitedEarly {
                status,
                stdout,
                stderr,
            } => {
                assert_eq!(status.code(), Some(2));
                assert!(stdout.contains("hello"), "{stdout}");
                assert!(stderr.contains("bad config"), "{stderr}");
            }
            other => panic!("unexpected error: {other}"),
        }
    }

    #[test]
    fn a_process_that_never_listens_times_out_and_is_killed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = fake_weir(dir.path(), "echo not yet; exec sleep 60");
        let err =
            WeirProcess::start_inner(bin, &[], Duration::from_millis(300)).expect_err("fails");
        assert!(matches!(err, HarnessError::StartTimeout { .. }), "{err}");
    }

    #[test]
    fn a_malformed_listening_line_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = fake_weir(
            dir.path(),
            "echo 'weir: listening on 127.0.0.1:0'; exec sleep 60",
        );
        let err = WeirProcess::start_inner(bin, &[], Duration::from_secs(30)).expect_err("fails");
        assert!(
            matches!(err, HarnessError::BadListeningLine { .. }),
            "{err}"
        );
    }

    #[test]
    fn listener_addresses_are_read_from_the_log() {
        let log = "2026-12-02T10:00:00Z  INFO weir_broker::server: \u{1b}[3maddr\u{1b}[0m=127.0.0.1:4001 \
                   \u{1b}[3mlistener\u{1b}[0m=SSL protocol=SSL listening\n\
                   INFO listening addr=127.0.0.1:4002 listener=SASL_SSL protocol=SASL_SSL\n";
        assert_eq!(
            listener_addr_in_log(log, "SSL"),
            Some("127.0.0.1:4001".parse().unwrap())
        );
        assert_eq!(
            listener_addr_in_log(log, "SASL_SSL"),
            Some("127.0.0.1:4002".parse().unwrap())
        );
        assert_eq!(listener_addr_in_log(log, "SASL_PLAINTEXT"), None);
    }

    #[test]
    fn host_port_validation() {
        assert!(is_host_port("127.0.0.1:9092"));
        assert!(is_host_port("localhost:1"));
        assert!(!is_host_port("127.0.0.1:0"));
        assert!(!is_host_port("127.0.0.1"));
        assert!(!is_host_port(":9092"));
        assert!(!is_host_port("127.0.0.1:99999"));
    }

    #[test]
    fn run_with_timeout_kills_a_hung_command() {
        let out = run_with_timeout(
            Command::new("sleep").arg("30"),
            None,
            Duration::from_millis(200),
        )
        .expect("sleep spawns");
        assert!(out.status.is_none(), "{out:?}");
        assert!(!out.success());
    }

    #[test]
    fn run_with_timeout_passes_stdin_and_captures_output() {
        let out = run_with_timeout(
            &mut Command::new("cat"),
            Some(b"hello\nworld\n"),
            Duration::from_secs(30),
        )
        .expect("cat spawns");
        assert!(out.success(), "{}", out.describe("cat"));
        assert_eq!(out.stdout, "hello\nworld\n");
    }
}

/// Sums the samples of `name` in Prometheus text whose label set contains
/// every `(label, value)` pair of `labels`.
pub fn sum_samples(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, label_text) = match series.split_once('{') {
                Some((m, rest)) => (m, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let matches = metric == name
                && labels.iter().all(|(k, v)| {
                    label_text
                        .split(',')
                        .any(|pair| pair == format!("{k}=\"{v}\""))
                });
            if matches {
                value.parse::<f64>().ok()
            } else {
                None
            }
        })
        .sum()
}

#[cfg(test)]
mod metric_tests {
    use super::sum_samples;

    #[test]
    fn sums_matching_samples_only() {
        let text = "# HELP x\nweir_requests_total{api=\"Heartbeat\"} 7\n\
                    weir_requests_total{api=\"Fetch\"} 3\n\
                    weir_request_errors_total{api=\"Heartbeat\",error=\"REBALANCE_IN_PROGRESS\"} 2\n\
                    weir_fetch_parked 1\n";
        assert_eq!(
            sum_samples(text, "weir_requests_total", &[("api", "Heartbeat")]),
            7.0
        );
        assert_eq!(sum_samples(text, "weir_requests_total", &[]), 10.0);
        assert_eq!(
            sum_samples(
                text,
                "weir_request_errors_total",
                &[("error", "REBALANCE_IN_PROGRESS")]
            ),
            2.0
        );
        assert_eq!(sum_samples(text, "weir_fetch_parked", &[]), 1.0);
        assert_eq!(sum_samples(text, "weir_requests", &[]), 0.0);
    }
}

/// Runs the kafka-python check script `script` (in `tests/compat/python`)
/// against `broker` with `--bootstrap`, prints its output and asserts that
/// its checks passed; skips (or fails, see [`skip_or_fail`]) without the
/// kafka-python venv.
pub fn run_python_check(broker: &WeirProcess, script: &str) {
    run_python_check_with(broker, script, &[]);
}

/// [`run_python_check`] with more arguments for the script (after
/// `--bootstrap`).
pub fn run_python_check_with(broker: &WeirProcess, script: &str, args: &[&str]) {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let out = run_with_timeout(
        std::process::Command::new(&python)
            .arg(tools::python_dir().join(script))
            .args(["--bootstrap", broker.bootstrap()])
            .args(args)
            .env("PYTHONUNBUFFERED", "1"),
        None,
        client_timeout(),
    )
    .expect("python spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, broker, script);
}

/// Runs the kafkajs check script `script` (in `tests/compat/js`) against
/// `broker`, as [`run_python_check`] does; skips without node or kafkajs.
pub fn run_js_check(broker: &WeirProcess, script: &str) {
    let Some(node) = tools::node() else {
        skip_or_fail("node (Node.js)");
        return;
    };
    if !tools::kafkajs_installed() {
        skip_or_fail("kafkajs (npm ci in tests/compat/js)");
        return;
    }
    let dir = tools::js_dir();
    let out = run_with_timeout(
        std::process::Command::new(&node)
            .current_dir(&dir)
            .arg(dir.join(script))
            .args(["--bootstrap", broker.bootstrap()]),
        None,
        client_timeout(),
    )
    .expect("node spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, broker, script);
}
