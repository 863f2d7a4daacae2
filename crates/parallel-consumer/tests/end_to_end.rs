//! End to end: 100 000 keyed records over 6 partitions, consumed in key
//! order by separate consumer processes (`examples/e2e_worker`) with a random
//! handler latency; one process is killed with SIGKILL mid-run and a fourth
//! joins. Every process applies effects through the SQLite helper into one
//! shared database and logs every handler invocation.
//!
//! Checked at the end, once every partition's committed offset reached its
//! end offset (see `docs/parallel-consumer.md`, "End-to-end run"):
//!
//! 1. at least once: every offset of every partition has a finished
//!    invocation (`E` line) in some process's log;
//! 2. exactly once: the database holds one applied event per record (the
//!    full expected set of `KEY/SEQ` ids, nothing else), no event was logged
//!    as applied twice, and each key's balance equals its record count;
//! 3. per-key order of effects: in the order effects were committed, each
//!    key's sequence numbers are exactly 0, 1, 2, … (increasing, no gap);
//! 4. per-key order of invocations: within one process, an invocation of a
//!    key starts only after the previous invocation of that key finished;
//! 5. the kill interrupted work: the process is frozen (SIGSTOP) and
//!    killed if its log shows records applied that no commit covers (offset
//!    or completed set), else resumed and checked again later; afterwards,
//!    at least one record it had applied was run again by another process,
//!    which found the effect there (`dup`).
//!
//! The worker binary is `target/<profile>/examples/e2e_worker`, which `cargo
//! test` builds with the tests; `WEIR_PC_E2E_WORKER` overrides the path, and
//! when it is missing it is built into a separate target directory.
//! `WEIR_PC_E2E_SEED` fixes the seed (printed on every run).

use crate::common;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::TestBroker;
use common::effects::EffectStore;
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_parallel_consumer::metadata::{self, CompletedSet};

const RECORDS: u64 = 100_000;
const KEYS: u64 = 3_000;
const PARTITIONS: i32 = 6;
const FIRST_WORKERS: usize = 3;
/// Share of the records committed before one process is killed.
const KILL_AFTER: u64 = RECORDS * 3 / 10;
/// Bound on the whole consumption.
const CONSUME_WAIT: Duration = Duration::from_secs(150);
const STOP_WAIT: Duration = Duration::from_secs(40);

/// splitmix64, as in the worker.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn key_name(k: u64) -> String {
    format!("k{k:04}")
}

/// Produces `RECORDS` records with keys drawn from `KEYS` values; each
/// carries its key's next sequence number in the `event-id` header
/// (`KEY/SEQ`) and the payload `KEY:1`. Returns the record count per key.
fn produce_sequenced(bootstrap: &str, topic: &str, seed: u64) -> HashMap<String, u64> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "20")
        .set("queue.buffering.max.messages", "200000")
        .create()
        .expect("producer");
    let mut counts: HashMap<String, u64> = HashMap::new();
    for i in 0..RECORDS {
        let key = key_name(mix(seed ^ i.wrapping_mul(0x1000_0001)) % KEYS);
        let seq = counts.entry(key.clone()).or_insert(0);
        let event_id = format!("{key}/{seq}");
        *seq += 1;
        let payload = format!("{key}:1");
        loop {
            let headers = OwnedHeaders::new().insert(Header {
                key: "event-id",
                value: Some(event_id.as_str()),
            });
            let record = BaseRecord::<str, str>::to(topic)
                .key(&key)
                .payload(&payload)
                .headers(headers);
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => panic!("send: {e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    counts
}

fn end_offsets(bootstrap: &str, topic: &str) -> Vec<i64> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("watermark reader");
    (0..PARTITIONS)
        .map(|p| {
            c.fetch_watermarks(topic, p, Duration::from_secs(10))
                .expect("watermarks")
                .1
        })
        .collect()
}

/// The group's committed offset per partition (-1: none).
fn committed_all(bootstrap: &str, group: &str, topic: &str) -> Vec<i64> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .expect("offset reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(topic, p);
    }
    let Ok(list) = c.committed_offsets(tpl, Duration::from_secs(10)) else {
        return vec![-1; PARTITIONS as usize];
    };
    (0..PARTITIONS)
        .map(
            |p| match list.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => o,
                _ => -1,
            },
        )
        .collect()
}

/// The group's committed offset per partition with the completed set in
/// its metadata (records above the offset a new owner skips).
fn committed_with_sets(bootstrap: &str, group: &str, topic: &str) -> Vec<(i64, CompletedSet)> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .expect("offset reader");
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(topic, p);
    }
    let list = c
        .committed_offsets(tpl, Duration::from_secs(10))
        .expect("OffsetFetch");
    (0..PARTITIONS)
        .map(|p| {
            let e = list.find_partition(topic, p);
            match e.as_ref().map(|e| e.offset()) {
                Some(Offset::Offset(o)) => {
                    let meta = e.map(|e| e.metadata().to_string()).unwrap_or_default();
                    let set = metadata::decode(&meta, o)
                        .unwrap_or_else(|e| panic!("partition {p}: commit metadata {meta:?}: {e}"));
                    (o, set)
                }
                _ => (-1, CompletedSet::default()),
            }
        })
        .collect()
}

/// One consumer process.
struct Worker {
    id: usize,
    child: Child,
    log: PathBuf,
    stderr: PathBuf,
    killed: bool,
}

struct Setup<'a> {
    bin: &'a Path,
    bootstrap: &'a str,
    topic: &'a str,
    group: &'a str,
    db: &'a Path,
    dir: &'a Path,
    seed: u64,
}

impl Worker {
    fn spawn(s: &Setup<'_>, id: usize) -> Worker {
        let log = s.dir.join(format!("invocations-{id}.log"));
        let stderr = s.dir.join(format!("worker-{id}.stderr"));
        let child = Command::new(s.bin)
            .env("WEIR_BOOTSTRAP", s.bootstrap)
            .env("WEIR_TOPIC", s.topic)
            .env("WEIR_GROUP", s.group)
            .env("WEIR_DB", s.db)
            .env("WEIR_PC_LOG", &log)
            .env("WEIR_PC_SEED", (s.seed ^ mix(id as u64)).to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", s.bin.display()));
        Worker {
            id,
            child,
            log,
            stderr,
            killed: false,
        }
    }

    /// SIGKILL: no shutdown, no final commit.
    fn kill(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
        self.killed = true;
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let start = text.len().saturating_sub(3000);
        let start = (start..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        format!("--- worker {} stderr ---\n{}", self.id, &text[start..])
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.killed && matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn diagnose(workers: &[Worker], committed: &[i64], ends: &[i64]) -> String {
    let mut s = format!("committed {committed:?}\nend offsets {ends:?}\n");
    for w in workers {
        s.push_str(&w.stderr_tail());
        s.push('\n');
    }
    s
}

/// One line of an invocation log.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    Start {
        partition: i32,
        offset: i64,
        event: String,
    },
    End {
        partition: i32,
        offset: i64,
        event: String,
        applied: bool,
    },
    /// A failed attempt (the driver retries it).
    Failed {
        partition: i32,
        offset: i64,
        event: String,
    },
}

/// Parses a log; a torn last line (no newline) is allowed only for a killed
/// process.
fn read_log(w: &Worker) -> Vec<Line> {
    read_log_lines(w, false)
}

/// The complete lines of a log; a torn last line (no newline) is allowed
/// for a killed process, or while the process still writes
/// (`in_progress`).
fn read_log_lines(w: &Worker, in_progress: bool) -> Vec<Line> {
    let text = std::fs::read_to_string(&w.log).unwrap_or_default();
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    assert!(
        in_progress || w.killed || complete.len() == text.len(),
        "worker {} left a torn log line without being killed",
        w.id
    );
    complete
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let partition = f
                .get(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| bad_line(w.id, l));
            let offset = f
                .get(2)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| bad_line(w.id, l));
            let event = f
                .get(3)
                .map(|v| v.to_string())
                .unwrap_or_else(|| bad_line(w.id, l));
            match (f[0], f.get(4).copied(), f.len()) {
                ("S", None, 4) => Line::Start {
                    partition,
                    offset,
                    event,
                },
                ("E", Some(what @ ("done" | "dup")), 5) => Line::End {
                    partition,
                    offset,
                    event,
                    applied: what == "done",
                },
                ("F", None, 4) => Line::Failed {
                    partition,
                    offset,
                    event,
                },
                _ => bad_line(w.id, l),
            }
        })
        .collect()
}

/// Records a worker started that no commit covers (at or above the
/// committed offset of their partition and not in its completed set), and
/// how many of those it applied (`E done`).
fn uncovered(lines: &[Line], committed: &[(i64, CompletedSet)]) -> (HashSet<(i32, i64)>, usize) {
    let open = |p: i32, o: i64| {
        committed
            .get(p as usize)
            .is_some_and(|(c, set)| o >= *c && !set.contains(o))
    };
    let mut started = HashSet::new();
    let mut applied = 0;
    for line in lines {
        match line {
            Line::Start {
                partition, offset, ..
            } if open(*partition, *offset) => {
                started.insert((*partition, *offset));
            }
            Line::End {
                partition,
                offset,
                applied: true,
                ..
            } if open(*partition, *offset) => applied += 1,
            _ => {}
        }
    }
    (started, applied)
}

/// Sends `signal` (`-STOP`, `-CONT`) to a worker process.
fn signal(w: &Worker, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &w.child.id().to_string()])
        .status()
        .expect("running kill");
    assert!(status.success(), "kill {signal} worker {}: {status}", w.id);
}

fn bad_line<T>(worker: usize, line: &str) -> T {
    panic!("worker {worker}: bad log line {line:?}")
}

fn split_event(event: &str) -> (&str, u64) {
    let (key, seq) = event
        .split_once('/')
        .unwrap_or_else(|| panic!("event id {event:?} is not KEY/SEQ"));
    let seq = seq
        .parse()
        .unwrap_or_else(|_| panic!("event id {event:?}: bad sequence number"));
    (key, seq)
}

#[test]
fn hundred_thousand_records_survive_a_killed_process_and_a_new_one() {
    let broker = TestBroker::from_env();
    let bootstrap = broker.bootstrap();
    let rt = common::runtime();
    let (topic, group) = (common::unique("e2e"), common::unique("ge2e"));
    let seed = std::env::var("WEIR_PC_E2E_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("end-to-end seed: WEIR_PC_E2E_SEED={seed}");
    broker.create_topic(&rt, &topic, PARTITIONS);
    let bin = common::example_binary("e2e_worker", "WEIR_PC_E2E_WORKER");
    let started = Instant::now();
    let counts = produce_sequenced(&bootstrap, &topic, seed);
    let ends = end_offsets(&bootstrap, &topic);
    assert_eq!(
        ends.iter().sum::<i64>(),
        RECORDS as i64,
        "end offsets {ends:?}"
    );
    eprintln!("produced {RECORDS} records in {:?}", started.elapsed());

    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("effects.db");
    // Create the schema and switch to WAL before the processes race for it.
    drop(
        EffectStore::open_shared(db.to_str().expect("utf-8 path"), Duration::from_secs(30))
            .expect("db"),
    );
    let setup = Setup {
        bin: &bin,
        bootstrap: &bootstrap,
        topic: &topic,
        group: &group,
        db: &db,
        dir: dir.path(),
        seed,
    };
    let mut workers: Vec<Worker> = (0..FIRST_WORKERS)
        .map(|i| Worker::spawn(&setup, i))
        .collect();

    // Mid-run: kill one process while it has applied records that no
    // commit covers, add another. The process is frozen (SIGSTOP) while
    // its log and the group's commits are read, so nothing it does between
    // that look and the SIGKILL can cover them.
    let deadline = started + CONSUME_WAIT;
    let committed_at_kill = loop {
        let committed = committed_all(&bootstrap, &group, &topic);
        let done: i64 = committed.iter().map(|&o| o.max(0)).sum();
        let mut applied_uncovered = 0;
        if done as u64 >= KILL_AFTER {
            signal(&workers[0], "-STOP");
            let at_stop = committed_with_sets(&bootstrap, &group, &topic);
            (_, applied_uncovered) = uncovered(&read_log_lines(&workers[0], true), &at_stop);
            if applied_uncovered > 0 {
                eprintln!(
                    "killing worker 0 at {done} committed, {applied_uncovered} records it applied not covered by a commit ({:?})",
                    started.elapsed()
                );
                workers[0].kill();
                break at_stop;
            }
            signal(&workers[0], "-CONT");
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {KILL_AFTER} commits with records applied by worker 0 that no commit covers (now {done} committed, {applied_uncovered} uncovered)\n{}",
            diagnose(&workers, &committed, &ends)
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    // Nothing of worker 0 was committed after `committed_at_kill` was read:
    // whatever it started and that commit did not cover was unfinished or
    // uncommitted work when it died.
    workers.push(Worker::spawn(&setup, FIRST_WORKERS));

    loop {
        let committed = committed_all(&bootstrap, &group, &topic);
        if committed == ends {
            eprintln!("all committed after {:?}", started.elapsed());
            break;
        }
        let exited = workers
            .iter_mut()
            .filter(|w| !w.killed)
            .find_map(|w| w.child.try_wait().ok().flatten().map(|s| (w.id, s)));
        if let Some((id, status)) = exited {
            panic!(
                "worker {id} exited early: {status}\n{}",
                diagnose(&workers, &committed, &ends)
            );
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting for every record to be committed\n{}",
            diagnose(&workers, &committed, &ends)
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // Clean stop: end of stdin.
    for w in workers.iter_mut().filter(|w| !w.killed) {
        drop(w.child.stdin.take());
    }
    let stop_deadline = Instant::now() + STOP_WAIT;
    for w in workers.iter_mut().filter(|w| !w.killed) {
        let status = loop {
            if let Some(status) = w.child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                Instant::now() < stop_deadline,
                "worker {} did not stop\n{}",
                w.id,
                w.stderr_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(
            status.success(),
            "worker {} failed: {status}\n{}",
            w.id,
            w.stderr_tail()
        );
    }

    let expected: HashSet<String> = counts
        .iter()
        .flat_map(|(k, &n)| (0..n).map(move |s| format!("{k}/{s}")))
        .collect();
    assert_eq!(expected.len() as u64, RECORDS);

    // 1. At least once, from the invocation logs.
    let mut event_at: HashMap<(i32, i64), String> = HashMap::new();
    let mut finished: HashSet<(i32, i64)> = HashSet::new();
    let mut applied_lines: HashMap<String, usize> = HashMap::new();
    let mut invocations = 0usize;
    for w in &workers {
        let lines = read_log(w);
        // 4. Per key, in one process: no invocation starts while another of
        // the same key runs.
        let mut running: HashMap<String, (i32, i64)> = HashMap::new();
        for line in &lines {
            match line {
                Line::Start {
                    partition,
                    offset,
                    event,
                } => {
                    invocations += 1;
                    let (key, _) = split_event(event);
                    if let Some(other) = running.insert(key.to_string(), (*partition, *offset)) {
                        panic!(
                            "worker {}: {event} at {partition}/{offset} started while {other:?} of the same key ran",
                            w.id
                        );
                    }
                    let seen = event_at
                        .entry((*partition, *offset))
                        .or_insert_with(|| event.clone());
                    assert_eq!(seen, event, "two events at {partition}/{offset}");
                }
                Line::Failed {
                    partition,
                    offset,
                    event,
                } => {
                    let (key, _) = split_event(event);
                    assert_eq!(
                        running.remove(key),
                        Some((*partition, *offset)),
                        "worker {}: failure of {event} without its start",
                        w.id
                    );
                }
                Line::End {
                    partition,
                    offset,
                    event,
                    applied,
                } => {
                    let (key, _) = split_event(event);
                    assert_eq!(
                        running.remove(key),
                        Some((*partition, *offset)),
                        "worker {}: end of {event} without its start",
                        w.id
                    );
                    finished.insert((*partition, *offset));
                    if *applied {
                        *applied_lines.entry(event.clone()).or_default() += 1;
                    }
                }
            }
        }
    }
    for (p, &end) in ends.iter().enumerate() {
        for o in 0..end {
            assert!(
                finished.contains(&(p as i32, o)),
                "record {p}/{o} was never handled to the end"
            );
        }
    }
    let invoked: HashSet<&String> = event_at.values().collect();
    assert_eq!(invoked.len(), expected.len(), "distinct events invoked");
    assert!(invoked.iter().all(|e| expected.contains(*e)));

    // The kill interrupted work: worker 0 had started records that no
    // commit covered, and some it had applied were delivered again to
    // another process, which found the effect there (`dup`).
    let killed_lines = read_log(&workers[0]);
    let offsets_at_kill: Vec<i64> = committed_at_kill.iter().map(|(o, _)| *o).collect();
    let (uncommitted_at_kill, _) = uncovered(&killed_lines, &committed_at_kill);
    let mut open_at_kill: HashSet<(i32, i64)> = HashSet::new();
    let mut applied_by_killed: HashSet<&str> = HashSet::new();
    for line in &killed_lines {
        match line {
            Line::Start {
                partition, offset, ..
            } => {
                open_at_kill.insert((*partition, *offset));
            }
            Line::End {
                partition,
                offset,
                event,
                applied,
            } => {
                open_at_kill.remove(&(*partition, *offset));
                if *applied {
                    applied_by_killed.insert(event);
                }
            }
            Line::Failed {
                partition, offset, ..
            } => {
                open_at_kill.remove(&(*partition, *offset));
            }
        }
    }
    let mut deduplicated = 0usize;
    for w in workers.iter().filter(|w| w.id != 0) {
        for line in read_log(w) {
            if let Line::End {
                event,
                applied: false,
                ..
            } = &line
                && applied_by_killed.contains(event.as_str())
            {
                deduplicated += 1;
            }
        }
    }
    eprintln!(
        "worker 0 at the kill: {} records started that no commit covered (offsets {offsets_at_kill:?} and their completed sets), {} still running; {deduplicated} records it had applied were run again elsewhere and found done",
        uncommitted_at_kill.len(),
        open_at_kill.len()
    );
    assert!(
        !uncommitted_at_kill.is_empty(),
        "the killed process had no unfinished or uncommitted work: the kill tested nothing"
    );
    assert!(
        deduplicated > 0,
        "no record the killed process had applied was delivered again and deduplicated"
    );

    // 2. Exactly once, from the database.
    let store = EffectStore::open(db.to_str().expect("utf-8 path")).expect("db");
    let applied = store.events_in_applied_order().expect("applied events");
    assert_eq!(applied.len() as u64, RECORDS, "applied effects");
    let applied_set: HashSet<&String> = applied.iter().collect();
    assert_eq!(applied_set.len(), applied.len(), "an event applied twice");
    assert!(
        applied.iter().all(|e| expected.contains(e)),
        "unexpected event"
    );
    if let Some((e, n)) = applied_lines.iter().find(|(_, n)| **n > 1) {
        panic!("{e} logged as applied {n} times");
    }
    for (key, &n) in &counts {
        assert_eq!(
            store.balance(key).expect("balance"),
            Some(n as i64),
            "balance of {key}"
        );
    }

    // 3. Per key, effects committed in sequence order.
    let mut next: HashMap<&str, u64> = HashMap::new();
    for e in &applied {
        let (key, seq) = split_event(e);
        let want = next.entry(key).or_insert(0);
        assert_eq!(
            seq, *want,
            "{key}: effect {seq} applied when {want} was next"
        );
        *want += 1;
    }

    let mut out = std::io::stderr();
    let _ = writeln!(
        out,
        "{invocations} invocations for {RECORDS} records ({} repeated after the kill and rebalances), {:?} in all",
        (invocations as u64).saturating_sub(RECORDS),
        started.elapsed()
    );
}
