//! This machine's limits, measured in the same run as the workloads:
//! page-cache append (`dd`), loopback TCP, sendfile to loopback, loopback
//! round trip and 4 KiB write + fdatasync latency.
//!
//! When `cores` is given, the "broker side" of each measurement (the dd
//! writer, the TCP writer, the sendfile sender, the echo server, the
//! fdatasync loop) runs on the broker's core and the "client side" on the
//! client's core, as in the workloads.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::broker::pin_current_thread;

/// 1 MiB, the chunk size of every bulk transfer here.
const CHUNK: usize = 1 << 20;
/// A socket read/write that takes longer than this fails the measurement.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Broker and client cores.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Cores {
    pub broker: usize,
    pub client: usize,
}

/// Latency percentiles in microseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Latency {
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub samples: u64,
}

impl Latency {
    pub fn from_histogram(h: &Histogram<u64>) -> Self {
        // Histograms record nanoseconds.
        Latency {
            p50_us: h.value_at_quantile(0.50) as f64 / 1e3,
            p99_us: h.value_at_quantile(0.99) as f64 / 1e3,
            max_us: h.max() as f64 / 1e3,
            samples: h.len(),
        }
    }
}

/// All limits of one run. Throughputs are in bytes per second.
#[derive(Clone, Debug, Serialize)]
pub struct Limits {
    pub page_cache_append_bytes_per_s: f64,
    pub dd_bytes: u64,
    pub tcp_loopback_bytes_per_s: f64,
    pub tcp_bytes: u64,
    pub sendfile_loopback_bytes_per_s: f64,
    pub sendfile_bytes: u64,
    pub loopback_rtt: Latency,
    pub fdatasync_4k: Latency,
}

/// Sizes of the limit measurements.
pub struct LimitSizes {
    pub dd_mib: u64,
    pub tcp_mib: u64,
    pub sendfile_mib: u64,
    pub rtt_iterations: u32,
    pub fsync_iterations: u32,
}

pub fn measure(dir: &Path, sizes: &LimitSizes, cores: Option<Cores>) -> Result<Limits> {
    eprintln!("limits: page-cache append with dd ({} MiB)", sizes.dd_mib);
    // Best of two: the first run may also pay for freeing old pages.
    let a = dd_append(dir, sizes.dd_mib, cores)?;
    let b = dd_append(dir, sizes.dd_mib, cores)?;
    let page_cache = a.max(b);
    eprintln!("limits: loopback TCP blast ({} MiB)", sizes.tcp_mib);
    let tcp = tcp_blast(sizes.tcp_mib << 20, cores)?;
    eprintln!("limits: sendfile to loopback ({} MiB)", sizes.sendfile_mib);
    let sendfile = sendfile_blast(dir, sizes.sendfile_mib << 20, cores)?;
    eprintln!(
        "limits: loopback round trip ({} x 1 byte)",
        sizes.rtt_iterations
    );
    let rtt = round_trip(sizes.rtt_iterations, cores)?;
    eprintln!(
        "limits: 4 KiB write + fdatasync ({} x)",
        sizes.fsync_iterations
    );
    let fsync = fdatasync_latency(dir, sizes.fsync_iterations, cores)?;
    Ok(Limits {
        page_cache_append_bytes_per_s: page_cache,
        dd_bytes: sizes.dd_mib << 20,
        tcp_loopback_bytes_per_s: tcp,
        tcp_bytes: sizes.tcp_mib << 20,
        sendfile_loopback_bytes_per_s: sendfile,
        sendfile_bytes: sizes.sendfile_mib << 20,
        loopback_rtt: rtt,
        fdatasync_4k: fsync,
    })
}

/// `dd if=/dev/zero of=<dir>/dd.tmp bs=1M count=N` without sync, on the
/// broker core; returns bytes per second computed from dd's own byte count
/// and elapsed seconds.
fn dd_append(dir: &Path, mib: u64, cores: Option<Cores>) -> Result<f64> {
    let target = dir.join("dd-append.tmp");
    let _ = std::fs::remove_file(&target);
    let mut cmd = match cores {
        Some(c) => {
            let mut t = Command::new("taskset");
            t.arg("-c").arg(c.broker.to_string()).arg("dd");
            t
        }
        None => Command::new("dd"),
    };
    cmd.arg("if=/dev/zero")
        .arg(format!("of={}", target.display()))
        .arg("bs=1M")
        .arg(format!("count={mib}"))
        .env("LC_ALL", "C");
    let out = cmd.output().context("run dd")?;
    let _ = std::fs::remove_file(&target);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("dd failed ({}): {stderr}", out.status);
    }
    let (bytes, secs) = parse_dd(&stderr).with_context(|| format!("parse dd output: {stderr}"))?;
    if bytes != mib << 20 {
        bail!("dd wrote {bytes} bytes, expected {}", mib << 20);
    }
    Ok(bytes as f64 / secs)
}

/// Parses dd's summary line, e.g.
/// `134217728 bytes (134 MB, 128 MiB) copied, 0.0519 s, 2.6 GB/s`,
/// into (bytes, seconds).
fn parse_dd(stderr: &str) -> Option<(u64, f64)> {
    let line = stderr.lines().find(|l| l.contains(" copied, "))?;
    let bytes: u64 = line.split_whitespace().next()?.parse().ok()?;
    let after = line.split(" copied, ").nth(1)?;
    let secs: f64 = after.split_whitespace().next()?.parse().ok()?;
    if secs > 0.0 {
        Some((bytes, secs))
    } else {
        None
    }
}

fn pin(core: Option<usize>) -> Result<()> {
    match core {
        Some(c) => pin_current_thread(c),
        None => Ok(()),
    }
}

/// Reads from `s` until EOF or `expected` bytes; returns the count.
fn drain(mut s: TcpStream, expected: u64) -> Result<u64> {
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    while total < expected {
        let n = match s.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("read from loopback"),
        };
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    Ok(total)
}

/// One thread writes `bytes` in 1 MiB chunks to 127.0.0.1, another reads.
fn tcp_blast(bytes: u64, cores: Option<Cores>) -> Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let writer = std::thread::spawn(move || -> Result<()> {
        pin(cores.map(|c| c.broker))?;
        let (mut s, _) = listener.accept()?;
        s.set_write_timeout(Some(IO_TIMEOUT))?;
        let buf = vec![0x5au8; CHUNK];
        let mut sent = 0u64;
        while sent < bytes {
            let n = (bytes - sent).min(CHUNK as u64) as usize;
            s.write_all(&buf[..n]).context("write to loopback")?;
            sent += n as u64;
        }
        Ok(())
    });
    pin(cores.map(|c| c.client))?;
    let s = TcpStream::connect(addr)?;
    let start = Instant::now();
    let got = drain(s, bytes)?;
    let secs = start.elapsed().as_secs_f64();
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))??;
    if got != bytes {
        bail!("TCP blast read {got} of {bytes} bytes");
    }
    Ok(bytes as f64 / secs)
}

/// `sendfile(2)` of a cached file of `bytes` to a loopback socket whose other
/// end another thread reads and discards.
fn sendfile_blast(dir: &Path, bytes: u64, cores: Option<Cores>) -> Result<f64> {
    let path = dir.join("sendfile-source.tmp");
    {
        let mut f = File::create(&path).context("create sendfile source")?;
        let buf = vec![0xa5u8; CHUNK];
        let mut written = 0u64;
        while written < bytes {
            let n = (bytes - written).min(CHUNK as u64) as usize;
            f.write_all(&buf[..n])?;
            written += n as u64;
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let path2 = path.clone();
    let sender = std::thread::spawn(move || -> Result<()> {
        pin(cores.map(|c| c.broker))?;
        let file = File::open(&path2)?;
        let (s, _) = listener.accept()?;
        s.set_write_timeout(Some(IO_TIMEOUT))?;
        let mut offset: libc::off_t = 0;
        // Bounded: every successful call advances offset by at least 1 byte.
        while (offset as u64) < bytes {
            let want = (bytes - offset as u64).min(1 << 30) as usize;
            let n = sendfile_once(&s, &file, &mut offset, want)?;
            if n == 0 {
                bail!("sendfile returned 0 at offset {offset}");
            }
        }
        Ok(())
    });
    pin(cores.map(|c| c.client))?;
    let s = TcpStream::connect(addr)?;
    let start = Instant::now();
    let got = drain(s, bytes)?;
    let secs = start.elapsed().as_secs_f64();
    let joined = sender
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"));
    let _ = std::fs::remove_file(&path);
    joined??;
    if got != bytes {
        bail!("sendfile blast read {got} of {bytes} bytes");
    }
    Ok(bytes as f64 / secs)
}

/// One `sendfile(2)` call, retried on EINTR.
#[allow(unsafe_code)]
fn sendfile_once(
    out: &TcpStream,
    file: &File,
    offset: &mut libc::off_t,
    count: usize,
) -> Result<usize> {
    loop {
        // SAFETY: both descriptors are borrowed from live owners for the
        // whole call, and `offset` is a valid, exclusively borrowed off_t.
        let n = unsafe { libc::sendfile(out.as_raw_fd(), file.as_raw_fd(), offset, count) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("sendfile");
        }
    }
}

/// 1-byte ping-pong over loopback with TCP_NODELAY; echo on the broker core.
fn round_trip(iterations: u32, cores: Option<Cores>) -> Result<Latency> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> Result<()> {
        pin(cores.map(|c| c.broker))?;
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        let mut b = [0u8; 1];
        // Bounded by the client's iteration count: it closes the socket.
        loop {
            match s.read(&mut b) {
                Ok(0) => return Ok(()),
                Ok(_) => s.write_all(&b)?,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    });
    pin(cores.map(|c| c.client))?;
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    let mut h = Histogram::<u64>::new(3)?;
    let warmup = 100;
    let mut b = [1u8; 1];
    for i in 0..iterations + warmup {
        let t = Instant::now();
        s.write_all(&b)?;
        s.read_exact(&mut b)?;
        if i >= warmup {
            h.record(t.elapsed().as_nanos() as u64)?;
        }
    }
    drop(s);
    echo.join()
        .map_err(|_| anyhow::anyhow!("echo panicked"))??;
    Ok(Latency::from_histogram(&h))
}

/// Appends 4 KiB and calls fdatasync, `iterations` times, on the broker core.
fn fdatasync_latency(dir: &Path, iterations: u32, cores: Option<Cores>) -> Result<Latency> {
    let path = dir.join("fdatasync.tmp");
    let path2 = path.clone();
    let h = std::thread::spawn(move || -> Result<Histogram<u64>> {
        pin(cores.map(|c| c.broker))?;
        let mut f = File::create(&path2)?;
        let buf = [0x3cu8; 4096];
        let mut h = Histogram::<u64>::new(3)?;
        for _ in 0..iterations {
            let t = Instant::now();
            f.write_all(&buf)?;
            f.sync_data()?;
            h.record(t.elapsed().as_nanos() as u64)?;
        }
        Ok(h)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("fdatasync thread panicked"))?;
    let _ = std::fs::remove_file(&path);
    Ok(Latency::from_histogram(&h?))
}

/// What the disk alone gives a group-committing writer at a given rate:
/// `files` files, each appended `record_bytes` at `rate / files` records per
/// second by a paced writer thread, while a syncer thread per file calls
/// fdatasync as soon as its previous one ends, covering everything written
/// meanwhile (the classic group commit). A record's latency runs from the
/// start of its write to the end of the first sync that covers it. No
/// network, no parsing, no broker: the floor of a `flush.messages=1`
/// workload at that rate on this disk, which a lone 4 KiB fdatasync does
/// not show (it has no bandwidth term). Writers and syncers run on the
/// broker core when `cores` is given.
pub fn group_commit_at(
    dir: &Path,
    files: usize,
    record_bytes: usize,
    rate: f64,
    seconds: f64,
    cores: Option<Cores>,
) -> Result<Latency> {
    use std::sync::{Arc, Condvar, Mutex};

    #[derive(Default)]
    struct File1 {
        written: u64,
        synced: u64,
        /// Record number and write start, not yet covered by a sync.
        waiting: std::collections::VecDeque<(u64, Instant)>,
        done: bool,
    }
    if files == 0 || rate <= 0.0 || seconds <= 0.0 {
        bail!("group commit: files, rate and seconds must be positive");
    }
    let per_file = rate / files as f64;
    let records = (per_file * seconds).ceil() as u64;
    let hist = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
    let mut threads = Vec::new();
    let mut paths = Vec::new();
    for i in 0..files {
        let path = dir.join(format!("group-commit-{i}.tmp"));
        let file = Arc::new(File::create(&path)?);
        paths.push(path);
        let state = Arc::new((Mutex::new(File1::default()), Condvar::new()));
        let (st, f, h) = (state.clone(), file.clone(), hist.clone());
        threads.push(std::thread::spawn(move || -> Result<()> {
            pin(cores.map(|c| c.broker))?;
            let (m, cv) = &*st;
            loop {
                let mut g = m.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                while g.written == g.synced && !g.done {
                    g = cv.wait(g).map_err(|_| anyhow::anyhow!("poisoned"))?;
                }
                if g.written == g.synced {
                    return Ok(());
                }
                let upto = g.written;
                drop(g);
                f.sync_data()?;
                let now = Instant::now();
                let mut g = m.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                g.synced = upto;
                let mut h = h.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                while g.waiting.front().is_some_and(|(n, _)| *n <= upto) {
                    if let Some((_, t)) = g.waiting.pop_front() {
                        h.record((now - t).as_nanos() as u64)?;
                    }
                }
            }
        }));
        threads.push(std::thread::spawn(move || -> Result<()> {
            pin(cores.map(|c| c.broker))?;
            let buf = vec![0x3cu8; record_bytes];
            let (m, cv) = &*state;
            let start = Instant::now();
            let result = (|| -> Result<()> {
                for k in 0..records {
                    let due = start + Duration::from_secs_f64(k as f64 / per_file);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    let t = Instant::now();
                    (&*file).write_all(&buf)?;
                    let mut g = m.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                    g.written += 1;
                    let n = g.written;
                    g.waiting.push_back((n, t));
                    cv.notify_all();
                }
                Ok(())
            })();
            if let Ok(mut g) = m.lock() {
                g.done = true;
            }
            cv.notify_all();
            result
        }));
    }
    let mut first_err = None;
    for t in threads {
        let r = t
            .join()
            .map_err(|_| anyhow::anyhow!("group commit thread panicked"))
            .and_then(|r| r);
        if let Err(e) = r {
            first_err.get_or_insert(e);
        }
    }
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let h = hist.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    Ok(Latency::from_histogram(&h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dd_summary_is_parsed() {
        let out = "128+0 records in\n128+0 records out\n134217728 bytes (134 MB, 128 MiB) copied, 0.0519 s, 2.6 GB/s\n";
        assert_eq!(parse_dd(out), Some((134217728, 0.0519)));
    }

    #[test]
    fn dd_garbage_is_rejected() {
        assert_eq!(
            parse_dd("dd: error writing: No space left on device\n"),
            None
        );
        assert_eq!(parse_dd("10 bytes copied, 0 s, inf B/s\n"), None);
    }

    #[test]
    fn blasts_move_every_byte() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(tcp_blast(8 << 20, None).expect("tcp") > 0.0);
        assert!(sendfile_blast(dir.path(), (8 << 20) + 123, None).expect("sendfile") > 0.0);
        assert!(!dir.path().join("sendfile-source.tmp").exists());
    }

    #[test]
    fn latency_probes_count_their_samples() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(round_trip(50, None).expect("rtt").samples, 50);
        assert_eq!(
            fdatasync_latency(dir.path(), 5, None)
                .expect("fsync")
                .samples,
            5
        );
    }

    #[test]
    fn group_commit_covers_every_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = group_commit_at(dir.path(), 2, 1024, 400.0, 0.25, None).expect("group commit");
        assert_eq!(l.samples, 100);
        assert!(!dir.path().join("group-commit-0.tmp").exists());
    }

    #[test]
    fn dd_measures_the_requested_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(dd_append(dir.path(), 4, None).expect("dd") > 0.0);
    }
}
