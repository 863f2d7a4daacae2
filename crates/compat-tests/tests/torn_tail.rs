//! A torn tail after a clean stop must not swallow later records.
//!
//! Bytes after the last complete batch of the active segment (a write torn
//! by a full disk, or junk) survive a clean stop. If a clean start kept
//! them, new appends would land after them, and the next crash recovery,
//! which stops at the first invalid batch, would cut every acknowledged
//! record written since. A clean start therefore cuts the active segment
//! after its last intact batch and logs how many bytes it cut.
//!
//! - `torn_tail_*`: junk appended by hand to the active `.log` of a cleanly
//!   stopped broker (3 000 random bytes, 8 KiB of zeros, the first 5 000
//!   bytes of a larger valid batch), then start, 100 acknowledged records,
//!   SIGKILL, restart: everything is readable and the high watermark did
//!   not go back.
//! - `full_disk_then_clean_restart_keeps_later_records`: the real chain on
//!   a 64 MiB ext4 loop mount (Linux, root): produce until the broker
//!   answers KAFKA_STORAGE_ERROR, free the space, SIGTERM, start, 200
//!   acknowledged records, SIGKILL, restart: 200 of 200 readable.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::{WeirProcess, skip_or_fail};

const TOPIC: &str = "torn";
const TIMEOUT: Duration = Duration::from_secs(30);

fn start() -> WeirProcess {
    WeirProcess::start_with_args(&[
        "--set",
        "log.flush.interval.messages=1",
        "--set",
        "http.listeners=",
    ])
    .unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

/// Sends `values` with an idempotent `acks=all` producer; returns each
/// record's offset. Every record must be acknowledged.
fn produce(broker: &WeirProcess, values: &[Vec<u8>]) -> Vec<i64> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "1")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("producer");
    for (i, v) in values.iter().enumerate() {
        let r: BaseRecord<'_, (), Vec<u8>> = BaseRecord::to(TOPIC).partition(0).payload(v);
        producer
            .send(r)
            .unwrap_or_else(|(e, _)| panic!("send of record {i}: {e}"));
    }
    producer
        .flush(TIMEOUT)
        .unwrap_or_else(|e| panic!("records not acknowledged: {e}\n{}", broker.stderr_tail()));
    // The offsets, from the log end before and after (one producer, one
    // partition, nothing else writes).
    let (_, high) = watermarks(broker);
    (high - values.len() as i64..high).collect()
}

fn consumer(broker: &WeirProcess) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        // librdkafka refuses assign() without a group.id; nothing joins
        // or commits to this group.
        .set("group.id", "weir-torn-tail-reader")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer")
}

fn watermarks(broker: &WeirProcess) -> (i64, i64) {
    consumer(broker)
        .fetch_watermarks(TOPIC, 0, TIMEOUT)
        .unwrap_or_else(|e| panic!("watermarks: {e}\n{}", broker.stderr_tail()))
}

/// Every record of partition 0 from the beginning up to the high watermark.
fn read_all(broker: &WeirProcess) -> Vec<(i64, Vec<u8>)> {
    let (_, high) = watermarks(broker);
    let c = consumer(broker);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)
        .expect("tpl");
    c.assign(&tpl).expect("assign");
    let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    while out.last().map_or(0, |(o, _)| o + 1) < high {
        assert!(
            Instant::now() < deadline,
            "read {} records, up to offset {:?}, high watermark {high}\n{}",
            out.len(),
            out.last().map(|(o, _)| o),
            broker.stderr_tail()
        );
        if let Some(m) = c.poll(Duration::from_millis(200)) {
            let m = m.unwrap_or_else(|e| panic!("consumer error: {e}\n{}", broker.stderr_tail()));
            out.push((m.offset(), m.payload().unwrap_or_default().to_vec()));
        }
    }
    out
}

fn values(prefix: &str, n: usize, size: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut v = format!("{prefix}-{i:05}-").into_bytes();
            v.resize(size.max(v.len()), b'a' + (i % 26) as u8);
            v
        })
        .collect()
}

/// The `.log` file with the highest base offset of partition 0.
fn active_segment(data_dir: &Path) -> PathBuf {
    let dir = data_dir.join(format!("{TOPIC}-0"));
    let mut logs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.pop()
        .unwrap_or_else(|| panic!("no .log file in {}", dir.display()))
}

/// The broker log without terminal colour codes.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... final byte in @..~
            for d in chars.by_ref() {
                if ('@'..='~').contains(&d) && d != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Deterministic pseudo-random bytes (xorshift64*).
fn junk(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            (seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

enum Junk {
    Random,
    Zeros,
    /// The first 5 000 bytes of a valid batch bigger than that, with the
    /// next offset as its base offset (a batch torn while being written).
    TornBatch,
}

fn torn_tail(kind: Junk) {
    let mut broker = start();
    // The first record alone makes a batch of more than 5 000 bytes.
    let big = values("big", 1, 6_000);
    let before: Vec<Vec<u8>> = big.into_iter().chain(values("before", 49, 100)).collect();
    produce(&broker, &before);
    broker.stop().unwrap_or_else(|e| panic!("clean stop: {e}"));
    let (_, high_before) = (0, before.len() as i64);

    let log = active_segment(broker.data_dir());
    let bytes = fs::read(&log).expect("read segment");
    let tail = match kind {
        Junk::Random => junk(3_000, 0x5eed),
        Junk::Zeros => vec![0; 8 * 1024],
        Junk::TornBatch => {
            let len = 12 + u32::from_be_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
            assert!(len > 5_000, "the first batch has only {len} bytes");
            let mut b = bytes[..5_000].to_vec();
            b[..8].copy_from_slice(&high_before.to_be_bytes());
            b
        }
    };
    OpenOptions::new()
        .append(true)
        .open(&log)
        .and_then(|mut f| f.write_all(&tail))
        .unwrap_or_else(|e| panic!("appending to {}: {e}", log.display()));

    broker
        .restart()
        .unwrap_or_else(|e| panic!("weir did not start after the junk: {e}"));
    // The clean start cuts the junk and says so (checked last).
    let start_log = plain(&broker.stderr_tail());

    let after = values("after", 100, 100);
    let offsets = produce(&broker, &after);
    let (_, high_acked) = watermarks(&broker);
    broker
        .kill_hard()
        .unwrap_or_else(|e| panic!("SIGKILL: {e}"));
    broker
        .restart()
        .unwrap_or_else(|e| panic!("weir did not start after SIGKILL: {e}"));
    let (_, high_after) = watermarks(&broker);
    assert!(
        high_after >= high_acked,
        "the high watermark went back from {high_acked} to {high_after} after SIGKILL\n{}",
        broker.stderr_tail()
    );
    let read = read_all(&broker);
    let want: Vec<(i64, Vec<u8>)> = (0..)
        .zip(before)
        .chain(offsets.into_iter().zip(after))
        .collect();
    let found = want.iter().filter(|w| read.contains(w)).count();
    assert_eq!(
        found,
        want.len(),
        "{} of {} acknowledged records readable after the junk, 100 appends, SIGKILL (read {} records, offsets {:?}..{:?})\n{}",
        found,
        want.len(),
        read.len(),
        read.first().map(|r| r.0),
        read.last().map(|r| r.0),
        broker.stderr_tail()
    );
    assert_eq!(read.len(), want.len(), "records read");
    // The clean start said what it cut: file and byte count.
    let name = log.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let cut_line = start_log
        .lines()
        .find(|l| l.contains(name) && l.contains(&format!("bytes={}", tail.len())));
    assert!(
        cut_line.is_some(),
        "no warning naming {name} and bytes={} in the broker log:\n{start_log}",
        tail.len()
    );
}

#[test]
fn torn_tail_random_bytes() {
    torn_tail(Junk::Random);
}

#[test]
fn torn_tail_zeros() {
    torn_tail(Junk::Zeros);
}

#[test]
fn torn_tail_partial_batch() {
    torn_tail(Junk::TornBatch);
}

/// A 64 MiB ext4 file system on a loop device, mounted on a directory;
/// unmounted (lazily if busy) and its loop device released on drop.
struct LoopMount {
    image: PathBuf,
    dir: PathBuf,
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl LoopMount {
    fn mount(image: PathBuf, dir: &Path) -> Result<LoopMount, String> {
        fs::File::create(&image)
            .and_then(|f| f.set_len(64 << 20))
            .map_err(|e| format!("creating {}: {e}", image.display()))?;
        run(Command::new("mkfs.ext4").arg("-q").arg("-F").arg(&image))?;
        run(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(dir))?;
        Ok(LoopMount {
            image,
            dir: dir.to_path_buf(),
        })
    }

    fn available_bytes(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(&self.dir)
            .output()
            .expect("df");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let devices = Command::new("losetup")
            .arg("-j")
            .arg(&self.image)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if run(Command::new("umount").arg(&self.dir)).is_err() {
            // Still in use (a broker being killed): detach now, the kernel
            // finishes once the last file is closed.
            let _ = run(Command::new("umount").arg("-l").arg(&self.dir));
        }
        for dev in devices.lines().filter_map(|l| l.split(':').next()) {
            let _ = run(Command::new("losetup").arg("-d").arg(dev));
        }
        let _ = fs::remove_file(&self.image);
    }
}

#[test]
fn full_disk_then_clean_restart_keeps_later_records() {
    if !cfg!(target_os = "linux") || !running_as_root() {
        skip_or_fail("root on Linux (loop-mounted ext4 file system)");
        return;
    }
    if ["mkfs.ext4", "mount", "losetup"].iter().any(|t| {
        weir_compat_tests::tools::find_on_path(t).is_none()
            && !Path::new("/usr/sbin").join(t).exists()
            && !Path::new("/sbin").join(t).exists()
    }) {
        skip_or_fail("mkfs.ext4, mount and losetup");
        return;
    }
    let started = Instant::now();
    // The broker's data dir becomes the mount point: started once to learn
    // the dir, killed (nothing in it matters), the file system mounted over
    // it, started again.
    let mut broker = start();
    broker
        .kill_hard()
        .unwrap_or_else(|e| panic!("SIGKILL: {e}"));
    let scratch = tempfile::tempdir().expect("temp dir");
    let mount = LoopMount::mount(scratch.path().join("fs.img"), broker.data_dir())
        .unwrap_or_else(|e| panic!("cannot set up the loop mount: {e}"));
    broker
        .restart()
        .unwrap_or_else(|e| panic!("weir did not start on the loop mount: {e}"));
    let first = values("first", 20, 1000);
    let mut acked: Vec<(i64, Vec<u8>)> = produce(&broker, &first).into_iter().zip(first).collect();

    // Leave about 1 MiB, then produce until the broker refuses.
    let filler = mount.dir.join("filler");
    {
        let mut f = fs::File::create(&filler).expect("filler");
        let chunk = vec![0u8; 1 << 20];
        let mut left = mount.available_bytes().saturating_sub(1 << 20);
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            if f.write_all(&chunk[..n]).is_err() {
                break;
            }
            left -= n as u64;
        }
        let _ = f.sync_all();
    }
    let errors = Arc::new(Mutex::new(Vec::new()));
    let producer: BaseProducer<ErrorsSeen> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("acks", "all")
        .set("enable.idempotence", "false")
        .set("retries", "0")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "10000")
        .create_with_context(ErrorsSeen(errors.clone()))
        .expect("producer");
    let fill = values("fill", 1, 16 * 1024).pop().unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut sent = 0usize;
    let storage_error = || {
        errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&RDKafkaErrorCode::KafkaStorageError)
    };
    while !storage_error() {
        assert!(
            Instant::now() < deadline,
            "no KAFKA_STORAGE_ERROR after {sent} records of 16 KiB on a full file system ({} bytes free; errors seen: {:?})\n{}",
            mount.available_bytes(),
            errors.lock().unwrap_or_else(|e| e.into_inner()),
            broker.stderr_tail()
        );
        for _ in 0..8 {
            let r: BaseRecord<'_, (), Vec<u8>> = BaseRecord::to(TOPIC).partition(0).payload(&fill);
            match producer.send(r) {
                Ok(()) => sent += 1,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => break,
                Err((e, _)) => panic!("send: {e}"),
            }
        }
        let _ = producer.flush(Duration::from_secs(10));
    }
    drop(producer);
    let stored_before = read_all(&broker);
    eprintln!(
        "file system full after {sent} fill records ({} bytes free), {} records stored",
        mount.available_bytes(),
        stored_before.len()
    );
    fs::remove_file(&filler).expect("remove filler");
    broker
        .stop()
        .unwrap_or_else(|e| panic!("clean stop after freeing space: {e}"));
    broker
        .restart()
        .unwrap_or_else(|e| panic!("weir did not start after the full disk: {e}"));
    let (_, high_before) = watermarks(&broker);
    let later = values("later", 200, 100);
    let offsets = produce(&broker, &later);
    acked.extend(offsets.into_iter().zip(later.iter().cloned()));
    broker
        .kill_hard()
        .unwrap_or_else(|e| panic!("SIGKILL: {e}"));
    broker
        .restart()
        .unwrap_or_else(|e| panic!("weir did not start after SIGKILL: {e}"));
    let read = read_all(&broker);
    let later_read = later
        .iter()
        .filter(|v| read.iter().any(|(_, r)| r == *v))
        .count();
    let lost: Vec<i64> = acked
        .iter()
        .filter(|a| !read.contains(a))
        .map(|a| a.0)
        .collect();
    eprintln!(
        "{later_read} of 200 later records readable; high watermark before them {high_before}; {:.1?}",
        started.elapsed()
    );
    assert!(
        lost.is_empty() && later_read == 200,
        "{later_read} of 200 records acknowledged after the full disk are readable; acknowledged offsets lost: {lost:?}\n{}",
        broker.stderr_tail()
    );
    // Unmount before the harness removes the data dir.
    broker
        .kill_hard()
        .unwrap_or_else(|e| panic!("SIGKILL: {e}"));
    drop(mount);
}

/// Collects the error code of every failed delivery.
struct ErrorsSeen(Arc<Mutex<Vec<RDKafkaErrorCode>>>);

impl ClientContext for ErrorsSeen {}

impl ProducerContext for ErrorsSeen {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            let code = e.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail);
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(code);
        }
    }
}

#[allow(unsafe_code)]
fn running_as_root() -> bool {
    // SAFETY: geteuid(2) takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
