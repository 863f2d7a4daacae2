//! `weir consume` against a real `weir serve` whose rolled segment file
//! holds a batch with a flipped byte (written after a clean stop, so the
//! restart neither recovers nor checks that segment, and the broker serves
//! the bytes as they are): the records before it are printed, then one
//! error line naming the topic, partition, offset and reason, and a
//! non-zero exit status.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_weir");

/// A `weir serve` on `data`; stopped with SIGTERM (a clean shutdown).
struct Served {
    child: Child,
    addr: String,
}

impl Served {
    fn start(data: &Path) -> Served {
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .args(["--set", "http.listeners="])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn weir serve");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let addr = lines.by_ref().find_map(|l| {
            l.ok()?
                .strip_prefix("weir: listening on ")
                .map(|a| a.trim().to_string())
        });
        std::thread::spawn(move || for _ in lines {});
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weir serve did not report its address");
        };
        Served { child, addr }
    }

    /// SIGTERM, then wait for a clean exit.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(killed.success());
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(status.success(), "weir serve exited with {status}");
                return;
            }
            assert!(Instant::now() < end, "weir serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Positions and sizes of the batches in a segment file (magic-2 layout:
/// base offset int64, batch length int32 counting the bytes after it).
fn batches(log: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 12 <= log.len() {
        let len = i32::from_be_bytes(log[pos + 8..pos + 12].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        out.push((pos, 12 + len));
        pos += 12 + len;
    }
    out
}

#[test]
fn consume_reports_a_corrupt_batch_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let broker = Served::start(&data);
    let run =
        |b: &Served, args: &[&str], stdin: Option<&str>| common::weir(Some(&b.addr), args, stdin);
    let o = run(
        &broker,
        &[
            "topics",
            "create",
            "--topic",
            "t",
            "--partitions",
            "1",
            // one batch per segment
            "--config",
            "segment.bytes=100",
        ],
        None,
    );
    assert_eq!(o.code, 0, "{o:?}");
    // one batch per produce run: offsets 0-1, 2-3, 4
    for lines in ["a0\na1\n", "b2\nb3\n", "c4\n"] {
        let o = run(&broker, &["produce", "--topic", "t"], Some(lines));
        assert_eq!(o.code, 0, "{o:?}");
    }
    broker.stop();

    // flip the last byte of the second batch (inside its records, covered
    // by the CRC); its segment is rolled, not the active one
    let seg = data.join("t-0").join("00000000000000000002.log");
    let mut log = std::fs::read(&seg).unwrap();
    let found = batches(&log);
    assert_eq!(found.len(), 1, "one batch in the segment: {found:?}");
    let (pos, size) = found[0];
    log[pos + size - 1] ^= 0x5a;
    std::fs::write(&seg, &log).unwrap();
    assert!(data.join("t-0").join("00000000000000000004.log").exists());

    let broker = Served::start(&data);
    let o = run(
        &broker,
        &[
            "consume",
            "--topic",
            "t",
            "--from-beginning",
            "--timeout-ms",
            "3000",
        ],
        None,
    );
    assert_ne!(o.code, 0, "consume exited 0: {o:?}");
    assert_eq!(
        o.stdout, "a0\na1\n",
        "records before the corrupt batch: {o:?}"
    );
    let err = o.stderr.trim_end();
    assert!(!err.contains('\n'), "one line: {err:?}");
    for w in ["topic t", "partition 0", "offset 2", "crc"] {
        assert!(err.contains(w), "{w:?} not in {err:?}");
    }
    broker.stop();
}
