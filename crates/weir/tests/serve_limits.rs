//! `weir serve` as a real process: the broker-wide bound on memory of
//! request frames being received (`queued.max.request.bytes`), measured as
//! the process's peak resident set (`VmHWM`), and the validation of
//! `--listen` / `listeners`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_weir");
const MIB: usize = 1 << 20;

/// A `weir serve` child with its Kafka and HTTP addresses; killed on drop.
struct Served {
    child: Child,
    addr: String,
    http: String,
}

impl Served {
    fn start(data: &Path, settings: &[&str]) -> Served {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .args(["--set", "http.listeners=127.0.0.1:0"]);
        for s in settings {
            cmd.args(["--set", s]);
        }
        let mut child = cmd
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn weir serve");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let (mut addr, mut http) = (None, None);
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if let Some(a) = line.strip_prefix("weir: listening on ") {
                addr = Some(a.trim().to_string());
            }
            if let Some(h) = line.strip_prefix("weir: metrics http://") {
                http = Some(h.trim_end_matches("/metrics").to_string());
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        let (Some(addr), Some(http)) = (addr, http) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weir serve did not report its addresses");
        };
        Served { child, addr, http }
    }

    /// A line of `/proc/<pid>/status` in bytes (`VmRSS`, `VmHWM`, in kB).
    fn status_bytes(&self, field: &str) -> usize {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read /proc status");
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
            .unwrap_or_else(|| panic!("no {field} in /proc status"));
        let kb: usize = line
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .expect("a number of kB");
        kb * 1024
    }

    /// The value of an unlabelled sample in `/metrics`.
    fn metric(&self, name: &str) -> u64 {
        let mut s = TcpStream::connect(&self.http).expect("connect to HTTP");
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.http
        )
        .expect("send");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("read /metrics");
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
            .trim()
            .parse()
            .expect("a number")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gate threads wait at until it is opened.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

/// Polls `cond` until it holds or `deadline` passes.
fn wait_until(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + deadline;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// 40 connections each send 24 MiB of a 24 MiB + 64 KiB frame (an
/// ApiVersions v0 request padded with zeros, which the broker ignores after
/// the body). With a 32 MiB budget only one frame is buffered at a time:
/// the others wait unread, and the peak RSS stays near the budget. Then
/// every connection completes its frame and gets its answer.
#[test]
fn queued_request_bytes_bound_the_memory_of_partial_frames() {
    const BUDGET: usize = 32 * MIB;
    const CONNS: usize = 40;
    const FIRST_PART: usize = 24 * MIB;
    const PADDING: usize = FIRST_PART + 64 * 1024;
    // budget + the broker's own memory (a debug build: ~20 MiB) + slack
    // for allocator rounding
    const LIMIT: usize = BUDGET + 64 * MIB;
    let dir = tempfile::tempdir().unwrap();
    let broker = Served::start(
        &dir.path().join("data"),
        &[&format!("queued.max.request.bytes={BUDGET}")],
    );
    let sent = Arc::new(AtomicUsize::new(0));
    let go = Arc::new(Gate::default());
    let zeros: Arc<Vec<u8>> = Arc::new(vec![0u8; MIB]);
    let threads: Vec<_> = (0..CONNS)
        .map(|i| {
            let addr = broker.addr.clone();
            let (sent, go, zeros) = (sent.clone(), go.clone(), zeros.clone());
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(&addr).expect("connect");
                // ApiVersions v0: key 18, version 0, correlation id, null client id
                let mut head = ((10 + PADDING) as i32).to_be_bytes().to_vec();
                head.extend_from_slice(&[0, 18, 0, 0]);
                head.extend_from_slice(&(i as i32).to_be_bytes());
                head.extend_from_slice(&[0xff, 0xff]);
                c.write_all(&head).expect("write header");
                for _ in 0..FIRST_PART / MIB {
                    c.write_all(&zeros).expect("write body");
                }
                sent.fetch_add(1, Ordering::SeqCst);
                go.wait();
                c.write_all(&zeros[..PADDING - FIRST_PART])
                    .expect("write the rest");
                let mut size = [0u8; 4];
                c.read_exact(&mut size).expect("answer size");
                let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
                c.read_exact(&mut body).expect("answer body");
                assert_eq!(&body[..4], &(i as i32).to_be_bytes(), "correlation id");
                assert_eq!(&body[4..6], &[0, 0], "ApiVersions error code");
            })
        })
        .collect();
    // Either every other connection waits for room (bounded), or every
    // connection got its 24 MiB read (unbounded): then the peak shows it.
    wait_until(
        "the connections to block or finish",
        Duration::from_secs(120),
        || {
            let n = sent.load(Ordering::SeqCst);
            n == CONNS
                || (n >= 1
                    && broker.metric("weir_request_memory_waiting_connections")
                        == (CONNS - 1) as u64)
        },
    );
    let reserved = broker.metric("weir_request_memory_reserved_bytes") as usize;
    let peak_blocked = broker.status_bytes("VmHWM");
    eprintln!(
        "blocked: VmRSS {} MiB, VmHWM {} MiB, reserved {} MiB, first parts sent {}",
        broker.status_bytes("VmRSS") / MIB,
        peak_blocked / MIB,
        reserved / MIB,
        sent.load(Ordering::SeqCst)
    );
    assert!(
        peak_blocked < LIMIT,
        "peak RSS {} MiB with {CONNS} partial 24 MiB frames and a {} MiB budget",
        peak_blocked / MIB,
        BUDGET / MIB
    );
    assert!(reserved <= 10 + PADDING, "reserved {reserved} bytes");
    // every frame completes and is answered (no deadlock)
    go.open();
    for t in threads {
        t.join().expect("a connection failed");
    }
    wait_until("the budget to be released", Duration::from_secs(30), || {
        broker.metric("weir_request_memory_reserved_bytes") == 0
    });
    let peak = broker.status_bytes("VmHWM");
    eprintln!("after all frames: VmHWM {} MiB", peak / MIB);
    assert!(
        peak < LIMIT,
        "peak RSS {} MiB while {CONNS} 24 MiB frames were served",
        peak / MIB
    );
}

/// Frames larger than the whole budget (but within socket.request.max.bytes)
/// are still served: each waits until nothing else is reserved.
#[test]
fn a_frame_larger_than_the_budget_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Served::start(
        &dir.path().join("data"),
        &["queued.max.request.bytes=1048576"],
    );
    let threads: Vec<_> = (0..3i32)
        .map(|i| {
            let addr = broker.addr.clone();
            std::thread::spawn(move || {
                let mut c = TcpStream::connect(&addr).expect("connect");
                let padding = 2 * MIB;
                let mut frame = ((10 + padding) as i32).to_be_bytes().to_vec();
                frame.extend_from_slice(&[0, 18, 0, 0]);
                frame.extend_from_slice(&i.to_be_bytes());
                frame.extend_from_slice(&[0xff, 0xff]);
                frame.resize(frame.len() + padding, 0);
                c.write_all(&frame).expect("write");
                let mut size = [0u8; 4];
                c.read_exact(&mut size).expect("answer size");
                let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
                c.read_exact(&mut body).expect("answer body");
                assert_eq!(&body[..4], &i.to_be_bytes());
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a connection failed");
    }
    wait_until("the budget to be released", Duration::from_secs(30), || {
        broker.metric("weir_request_memory_reserved_bytes") == 0
    });
}

/// Runs `weir serve args…` in a fresh data dir, expecting it to refuse to
/// start: returns its exit status and stderr. A broker that starts anyway
/// is killed at the deadline and fails the test.
fn serve_refused(args: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(args)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--set", "http.listeners="])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn weir serve");
    let end = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weir serve {args:?} started instead of refusing the configuration");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    (status.code().unwrap_or(-1), stderr)
}

/// `--listen` never hides a `listeners` setting: an unsupported security
/// protocol is a start error naming the setting, and a disagreeing
/// address is refused; both print one line and exit with status 2.
#[test]
fn listen_shorthand_and_listeners_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    std::fs::write(&file, "listeners=KERBEROS://127.0.0.1:9093\n").unwrap();
    let file = file.display().to_string();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--listen", "127.0.0.1:0", "--config", &file],
            &["listeners", "KERBEROS"],
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--set",
                "listeners=SSL://127.0.0.1:9093",
            ],
            &["listeners", "SSL"],
        ),
        (
            &[
                "--set",
                "listeners=PLAINTEXT://127.0.0.1:0,KERBEROS://127.0.0.1:0",
            ],
            &["listeners", "no security protocol for listener KERBEROS"],
        ),
        (
            &["--listen", "KERBEROS://127.0.0.1:0"],
            &["--listen", "KERBEROS"],
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--set",
                "listeners=PLAINTEXT://127.0.0.1:19092",
            ],
            &["--listen", "listeners=PLAINTEXT://127.0.0.1:19092"],
        ),
    ];
    for (args, words) in cases {
        let (code, stderr) = serve_refused(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        let line = stderr.trim_end();
        assert!(
            !line.contains('\n'),
            "{args:?}: more than one line: {stderr}"
        );
        assert!(
            line.starts_with("weir serve: invalid configuration:"),
            "{line}"
        );
        for w in *words {
            assert!(line.contains(w), "{args:?}: {w:?} not in {line:?}");
        }
    }
}
