//! The broker under test: starting weir pinned to a core, pinning this
//! process, and reading a process's CPU time and peak RSS from `/proc`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long `weir serve` may take to print its listening line.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a SIGTERM'd broker may take to exit before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// A weir process started by the harness. Always stopped on drop.
pub struct WeirProcess {
    child: Child,
    pub bootstrap: String,
    pub log_path: PathBuf,
}

impl WeirProcess {
    /// Starts `weir serve` under `taskset -c <core>` on `data_dir`, and waits
    /// for its `weir: listening on HOST:PORT` line.
    pub fn start(weir: &Path, core: usize, data_dir: &Path, sets: &[String]) -> Result<Self> {
        let log_path = data_dir.with_extension("log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("create {}", log_path.display()))?;
        let mut cmd = Command::new("taskset");
        cmd.arg("-c")
            .arg(core.to_string())
            .arg(weir)
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir);
        if !sets.iter().any(|s| s.starts_with("listeners=")) {
            cmd.arg("--listen").arg("127.0.0.1:0");
        }
        for s in sets {
            cmd.arg("--set").arg(s);
        }
        cmd.env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        let mut child = cmd
            .spawn()
            .with_context(|| format!("start taskset -c {core} {}", weir.display()))?;
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let (tx, rx) = mpsc::channel::<String>();
        // Drains stdout for the broker's whole life so it never blocks on a
        // full pipe; forwards the lines until the receiver is gone.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        let mut proc = WeirProcess {
            child,
            bootstrap: String::new(),
            log_path,
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!(
                    "weir did not print its listening line within {START_TIMEOUT:?}; log: {}",
                    proc.log_path.display()
                );
            }
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = line.strip_prefix("weir: listening on ") {
                        proc.bootstrap = addr.trim().to_string();
                        return Ok(proc);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = proc.child.try_wait().ok().flatten();
                    bail!(
                        "weir exited before listening ({status:?}); log {}:\n{}",
                        proc.log_path.display(),
                        log_tail(&proc.log_path)
                    );
                }
            }
        }
    }

    /// The broker's pid (taskset execs the broker, so it keeps the pid).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL, as a crash would stop it (nothing flushed, no clean
    /// shutdown marker); waits for the process to be gone.
    pub fn kill9(&mut self) -> Result<()> {
        self.child.kill().context("kill -9 weir")?;
        self.child.wait().context("wait for weir")?;
        Ok(())
    }

    /// SIGTERM, then wait up to [`STOP_TIMEOUT`], then SIGKILL.
    pub fn stop(&mut self) {
        if !self.alive() {
            return;
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("weir did not exit within {STOP_TIMEOUT:?} of SIGTERM; killing it");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WeirProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last 2 KiB of a log file, for error messages.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.len().saturating_sub(2048);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    text[start..].to_string()
}

/// Pins every thread of this process (and threads it creates later) to `core`.
pub fn pin_self(core: usize) -> Result<()> {
    let status = Command::new("taskset")
        .args([
            "-a",
            "-c",
            "-p",
            &core.to_string(),
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .status()
        .context("run taskset")?;
    if !status.success() {
        bail!("taskset -a -c -p {core} failed: {status}");
    }
    Ok(())
}

/// Pins the calling thread only (found through `/proc/thread-self`).
pub fn pin_current_thread(core: usize) -> Result<()> {
    let link = std::fs::read_link("/proc/thread-self").context("read /proc/thread-self")?;
    let tid = link
        .file_name()
        .and_then(|s| s.to_str())
        .context("bad /proc/thread-self link")?
        .to_string();
    let status = Command::new("taskset")
        .args(["-c", "-p", &core.to_string(), &tid])
        .stdout(Stdio::null())
        .status()
        .context("run taskset")?;
    if !status.success() {
        bail!("taskset -c -p {core} {tid} failed: {status}");
    }
    Ok(())
}

/// CPU seconds (user + system) and peak RSS of a process at one moment.
#[derive(Clone, Copy, Debug)]
pub struct ProcSample {
    pub cpu_seconds: f64,
    pub peak_rss_kib: u64,
}

/// Clock ticks per second for `/proc/PID/stat` (from `getconf CLK_TCK`).
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// Reads utime + stime and VmHWM of `pid`.
pub fn sample(pid: u32, ticks: f64) -> Result<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("read /proc/{pid}/stat"))?;
    let cpu_seconds = parse_stat_cpu(&stat).context("parse /proc/PID/stat")? / ticks;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    let peak_rss_kib = parse_vm_hwm(&status).context("no VmHWM in /proc/PID/status")?;
    Ok(ProcSample {
        cpu_seconds,
        peak_rss_kib,
    })
}

/// Resets the peak RSS (VmHWM) of `pid` to its current RSS so the next
/// sample shows the peak of one workload. Best effort: needs ownership.
pub fn reset_peak_rss(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// utime + stime in clock ticks. Fields 14 and 15 of `/proc/PID/stat`,
/// counted after the `)` that closes the command name (which may hold spaces).
fn parse_stat_cpu(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state), so field N is at index N - 3.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cpu_skips_command_names_with_spaces() {
        let stat = "1234 (weir serve) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 9 0 55 1000 200";
        assert_eq!(parse_stat_cpu(stat), Some(281.0));
    }

    #[test]
    fn stat_cpu_rejects_truncated_input() {
        assert_eq!(parse_stat_cpu("1234 (weir) S 1 2"), None);
        assert_eq!(parse_stat_cpu("no paren"), None);
    }

    #[test]
    fn vm_hwm_is_read_in_kib() {
        let status = "Name:\tweir\nVmPeak:\t  9000 kB\nVmHWM:\t   4321 kB\nVmRSS:\t 4000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(4321));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
    }

    #[test]
    fn own_process_can_be_sampled() {
        let s = sample(std::process::id(), clock_ticks()).expect("sample self");
        assert!(s.peak_rss_kib > 0);
        assert!(s.cpu_seconds >= 0.0);
    }
}
