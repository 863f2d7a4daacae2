//! librdkafka group members as separate OS processes (the
//! `rdkafka-group-member` helper binary) against a real `weir serve`:
//!
//! - three members of one group on a 6-partition topic join one by one, one
//!   leaves cleanly (close), one is SIGKILLed and its partitions move after
//!   the session timeout; then a member stops part way and a restarted one
//!   resumes. Checked: every produced record is consumed; no partition has
//!   two owners in one generation; committed offsets (polled with
//!   OffsetFetch throughout) never move backwards; every partition handed
//!   over (leave, kill, restart) is resumed exactly at the committed offset,
//!   so the record before it is never seen again; at the end the committed
//!   offsets are the log end offsets. Eager (`range`, `roundrobin`) and
//!   `cooperative-sticky` assignment.
//! - a static member (`group.instance.id`) SIGKILLed and restarted within its
//!   session timeout gets its old generation and partitions back without a
//!   rebalance: the other member sees no new generation.
//! - the broker is stopped (SIGTERM, then SIGKILL) while a member commits:
//!   every acknowledged commit survives the restart, and the next member
//!   resumes at the committed offsets.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use weir_compat_tests::WeirProcess;

const MEMBER_BIN: &str = env!("CARGO_BIN_EXE_rdkafka-group-member");
const PARTITIONS: i32 = 6;
const TIMEOUT: Duration = Duration::from_secs(30);
/// Bound for each awaited group state (joins, leaves, session expiry).
const STEP_TIMEOUT: Duration = Duration::from_secs(90);

/// One line printed by the helper (see `src/bin/rdkafka_group_member.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    Joined {
        generation: i32,
    },
    Own {
        generation: i32,
        partitions: BTreeSet<i32>,
    },
    Rec {
        partition: i32,
        offset: i64,
        value: String,
    },
    Commit {
        partition: i32,
        offset: i64,
    },
    CommitFail,
    Closed,
    Error(String),
    Other(String),
}

fn parse_event(line: &str) -> Event {
    let mut words = line.splitn(4, ' ');
    let kind = words.next().unwrap_or("");
    let a = words.next();
    let b = words.next();
    let rest = words.next();
    let int = |s: Option<&str>| s.and_then(|s| s.parse::<i64>().ok());
    match (kind, int(a), int(b)) {
        ("JOINED", Some(g), _) => Event::Joined {
            generation: g as i32,
        },
        ("OWN", Some(g), _) => Event::Own {
            generation: g as i32,
            partitions: b
                .unwrap_or("")
                .split(',')
                .filter_map(|p| p.parse().ok())
                .collect(),
        },
        ("REC", Some(p), Some(o)) => Event::Rec {
            partition: p as i32,
            offset: o,
            value: rest.unwrap_or("").to_string(),
        },
        ("COMMIT", Some(p), Some(o)) => Event::Commit {
            partition: p as i32,
            offset: o,
        },
        ("COMMITFAIL", _, _) => Event::CommitFail,
        ("CLOSED", _, _) => Event::Closed,
        ("ERROR", _, _) => Event::Error(line.to_string()),
        _ => Event::Other(line.to_string()),
    }
}

/// A running helper process and the events it has printed so far.
pub(crate) struct Member {
    name: String,
    /// Who owns its partitions: the static instance id if it has one (a
    /// restarted static member takes its predecessor's place in the same
    /// generation), else its own name.
    identity: String,
    child: Child,
    stdin: Option<ChildStdin>,
    events: Arc<Mutex<Vec<Event>>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl Member {
    pub(crate) fn spawn(
        name: &str,
        broker: &WeirProcess,
        group: &str,
        topic: &str,
        args: &[&str],
    ) -> Self {
        let mut cmd = Command::new(MEMBER_BIN);
        cmd.args(["--bootstrap", broker.bootstrap()])
            .args(["--group", group, "--topic", topic])
            .args(args);
        Self::start(name, cmd, args)
    }

    /// A kafka-python member of the classic protocol
    /// (`tests/compat/python/group_member.py`, same event lines).
    pub(crate) fn spawn_python(
        name: &str,
        python: &std::path::Path,
        broker: &WeirProcess,
        group: &str,
        topic: &str,
        args: &[&str],
    ) -> Self {
        let mut cmd = Command::new(python);
        cmd.arg(weir_compat_tests::tools::python_dir().join("group_member.py"))
            .args(["--bootstrap", broker.bootstrap()])
            .args(["--group", group, "--topic", topic])
            .args(args)
            .env("PYTHONUNBUFFERED", "1");
        Self::start(name, cmd, args)
    }

    fn start(name: &str, mut cmd: Command, args: &[&str]) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let events = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            let events = Arc::clone(&events);
            readers.push(thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    lock(&events).push(parse_event(&line));
                }
            }));
        }
        if let Some(mut err) = child.stderr.take() {
            let stderr = Arc::clone(&stderr);
            readers.push(thread::spawn(move || {
                let mut text = String::new();
                let _ = err.read_to_string(&mut text);
                lock(&stderr).push_str(&text);
            }));
        }
        let identity = args
            .iter()
            .position(|a| *a == "--instance-id")
            .and_then(|i| args.get(i + 1))
            .map_or_else(|| name.to_string(), |id| format!("instance {id}"));
        Member {
            name: name.to_string(),
            identity,
            stdin: child.stdin.take(),
            child,
            events,
            stderr,
            readers,
        }
    }

    pub(crate) fn events(&self) -> Vec<Event> {
        lock(&self.events).clone()
    }

    /// The latest `OWN` line: (generation, partitions).
    pub(crate) fn owned(&self) -> Option<(i32, BTreeSet<i32>)> {
        self.events().into_iter().rev().find_map(|e| match e {
            Event::Own {
                generation,
                partitions,
            } => Some((generation, partitions)),
            _ => None,
        })
    }

    /// Waits for the process to exit after its stdin closed (or on its own).
    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                for r in self.readers.drain(..) {
                    let _ = r.join();
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "member {} did not exit within {STEP_TIMEOUT:?}\n{}",
                self.name,
                self.describe()
            );
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Clean stop: close stdin, the helper closes its consumer (LeaveGroup).
    pub(crate) fn close(&mut self) {
        drop(self.stdin.take());
        let status = self.wait_exit();
        assert!(
            status.success() && self.events().last() == Some(&Event::Closed),
            "member {} did not close cleanly ({status})\n{}",
            self.name,
            self.describe()
        );
    }

    /// SIGKILL: the member vanishes without leaving the group.
    pub(crate) fn kill(&mut self) {
        self.child.kill().expect("kill member");
        let status = self.wait_exit();
        assert!(!status.success(), "{status}");
    }

    pub(crate) fn describe(&self) -> String {
        let events = self.events();
        let interesting: Vec<String> = events
            .iter()
            .filter(|e| !matches!(e, Event::Rec { .. } | Event::Commit { .. }))
            .map(|e| format!("{e:?}"))
            .collect();
        let recs = events
            .iter()
            .filter(|e| matches!(e, Event::Rec { .. }))
            .count();
        format!(
            "--- member {} ({recs} records) ---\n{}\n--- member {} stderr ---\n{}",
            self.name,
            interesting.join("\n"),
            self.name,
            lock(&self.stderr)
        )
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn diagnostics(broker: &WeirProcess, members: &[&Member]) -> String {
    let mut s: String = members.iter().map(|m| m.describe() + "\n").collect();
    s.push_str("--- weir stderr (tail) ---\n");
    s.push_str(&broker.stderr_tail());
    s
}

pub(crate) fn wait_for(
    what: &str,
    broker: &WeirProcess,
    members: &[&Member],
    mut done: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + STEP_TIMEOUT;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out ({STEP_TIMEOUT:?}) waiting for: {what}\n{}",
            diagnostics(broker, members)
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// The generation in which exactly `members` share every partition (each
/// owning at least one, none twice), judged by their latest `OWN` lines.
fn shared_generation(members: &[&Member]) -> Option<i32> {
    let mut generation = None;
    let mut all = BTreeSet::new();
    for m in members {
        let (g, parts) = m.owned()?;
        if parts.is_empty() || generation.is_some_and(|x| x != g) || !all.is_disjoint(&parts) {
            return None;
        }
        generation = Some(g);
        all.extend(parts);
    }
    (all.len() == PARTITIONS as usize).then_some(generation?)
}

fn consumed(members: &[&Member]) -> HashSet<String> {
    members
        .iter()
        .flat_map(|m| m.events())
        .filter_map(|e| match e {
            Event::Rec { value, .. } => Some(value),
            _ => None,
        })
        .collect()
}

/// True when every record the member processed has its commit answered
/// (it is idle, not between a record and its commit).
fn commits_settled(m: &Member) -> bool {
    let events = m.events();
    let recs = events
        .iter()
        .filter(|e| matches!(e, Event::Rec { .. }))
        .count();
    let answers = events
        .iter()
        .filter(|e| matches!(e, Event::Commit { .. } | Event::CommitFail))
        .count();
    recs == answers
}

/// No partition owned by two members within one generation (over every
/// `OWN` line every member printed).
fn assert_single_owner(broker: &WeirProcess, members: &[&Member]) -> usize {
    let mut by_generation: BTreeMap<i32, BTreeMap<&str, BTreeSet<i32>>> = BTreeMap::new();
    for m in members {
        for e in m.events() {
            if let Event::Own {
                generation,
                partitions,
            } = e
            {
                by_generation
                    .entry(generation)
                    .or_default()
                    .entry(m.identity.as_str())
                    .or_default()
                    .extend(partitions);
            }
        }
    }
    for (generation, owners) in &by_generation {
        let mut seen: BTreeMap<i32, &str> = BTreeMap::new();
        for (member, parts) in owners {
            for p in parts {
                if let Some(other) = seen.insert(*p, member) {
                    panic!(
                        "partition {p} owned by {other} and {member} in generation {generation}: {owners:?}\n{}",
                        diagnostics(broker, members)
                    );
                }
            }
        }
    }
    by_generation.len()
}

/// A snapshot of every member's event count, to look at what came after.
struct Mark(Vec<usize>);

fn mark(members: &[&Member]) -> Mark {
    Mark(members.iter().map(|m| m.events().len()).collect())
}

/// Every partition in `handed` was resumed, after `before`, exactly at the
/// highest offset committed for it before `before` (0 if none): the smallest
/// offset any member read from it afterwards is that offset, or nothing was
/// read because that offset is the log end (`end`). `members` must be in the
/// order `before` was taken, plus any started later. Returns how many
/// partitions were actually resumed (had records after the commit).
fn assert_resumed_at_commit(
    what: &str,
    broker: &WeirProcess,
    members: &[&Member],
    before: &Mark,
    handed: &BTreeSet<i32>,
    end: &[i64],
) -> usize {
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    let mut read_before: BTreeMap<i32, i64> = BTreeMap::new();
    let mut read_after: BTreeMap<i32, i64> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        let cut = before.0.get(i).copied().unwrap_or(0);
        for (j, e) in m.events().into_iter().enumerate() {
            match e {
                Event::Commit { partition, offset } if j < cut => {
                    let c = committed.entry(partition).or_insert(offset);
                    *c = (*c).max(offset);
                }
                Event::Rec {
                    partition, offset, ..
                } if j < cut => {
                    let r = read_before.entry(partition).or_insert(offset);
                    *r = (*r).max(offset);
                }
                Event::Rec {
                    partition, offset, ..
                } if j >= cut => {
                    let r = read_after.entry(partition).or_insert(offset);
                    *r = (*r).min(offset);
                }
                _ => {}
            }
        }
    }
    assert!(!handed.is_empty(), "{what}: no partition was handed over");
    let mut resumed = 0;
    for p in handed {
        let expected = committed.get(p).copied().unwrap_or(0);
        let at_end = end.get(*p as usize) == Some(&expected);
        let wanted = (!at_end).then_some(expected);
        assert_eq!(
            read_after.get(p).copied(),
            wanted,
            "{what}: partition {p} was not resumed at its committed offset {expected} (log end {end:?}; committed {committed:?}; first read after {read_after:?})\n{}",
            diagnostics(broker, members)
        );
        // The committed offset names the next record: when the last record
        // read before the hand-over was committed (offset + 1), it is never
        // read again.
        if let Some(last) = read_before.get(p).filter(|&&o| o + 1 == expected) {
            assert!(
                read_after.get(p).is_none_or(|first| first > last),
                "{what}: partition {p}: record {last} read again after its commit"
            );
        }
        resumed += usize::from(!at_end);
    }
    resumed
}

/// Polls OffsetFetch for the group on a thread, recording every answer.
struct CommitMonitor {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Vec<i64>>>>,
    thread: Option<JoinHandle<()>>,
}

fn committed_now(consumer: &BaseConsumer, topic: &str) -> Option<Vec<i64>> {
    let mut list = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        list.add_partition(topic, p);
    }
    let answer = consumer.committed_offsets(list, TIMEOUT).ok()?;
    (0..PARTITIONS)
        .map(|p| match answer.find_partition(topic, p)?.offset() {
            Offset::Offset(o) => Some(o),
            Offset::Invalid => Some(-1),
            _ => None,
        })
        .collect()
}

fn offsets_client(broker: &WeirProcess, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("offset-fetch client")
}

impl CommitMonitor {
    fn start(broker: &WeirProcess, group: &str, topic: &str) -> Self {
        let consumer = offsets_client(broker, group);
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, samples, topic) =
                (Arc::clone(&stop), Arc::clone(&samples), topic.to_string());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if let Some(sample) = committed_now(&consumer, &topic) {
                        lock(&samples).push(sample);
                    }
                    thread::sleep(Duration::from_millis(200));
                }
            })
        };
        CommitMonitor {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    /// Stops polling; returns every answer, in order.
    fn finish(mut self) -> Vec<Vec<i64>> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        lock(&self.samples).clone()
    }
}

fn assert_never_backwards(samples: &[Vec<i64>]) {
    for pair in samples.windows(2) {
        for p in 0..PARTITIONS as usize {
            assert!(
                pair[1][p] >= pair[0][p],
                "committed offset of partition {p} moved backwards: {:?} -> {:?}",
                pair[0],
                pair[1]
            );
        }
    }
}

pub(crate) fn create_topic(
    rt: &tokio::runtime::Runtime,
    broker: &WeirProcess,
    topic: &str,
    partitions: i32,
) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .create()
        .expect("admin client");
    let opts = AdminOptions::new().operation_timeout(Some(TIMEOUT));
    let r = rt
        .block_on(admin.create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &opts,
        ))
        .expect("create topics");
    assert!(r[0].is_ok(), "{r:?}");
}

/// Produces `count` records `<tag>-<i>` round-robin over `partitions` and
/// waits for every acknowledgement; returns the values.
pub(crate) fn produce(
    rt: &tokio::runtime::Runtime,
    broker: &WeirProcess,
    topic: &str,
    partitions: i32,
    tag: &str,
    count: usize,
) -> Vec<String> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("acks", "all")
        .create()
        .expect("producer");
    let values: Vec<String> = (0..count).map(|i| format!("{tag}-{i}")).collect();
    let mut pending = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let record = FutureRecord::<(), _>::to(topic)
            .payload(value)
            .partition(i as i32 % partitions);
        match producer.send_result(record) {
            Ok(f) => pending.push(f),
            Err((e, _)) => panic!("produce {value}: {e}"),
        }
    }
    for f in pending {
        match rt.block_on(f) {
            Ok(Ok(_)) => {}
            other => panic!("produce not acknowledged: {other:?}"),
        }
    }
    values
}

fn high_watermarks(broker: &WeirProcess, topic: &str) -> Vec<i64> {
    let c = offsets_client(broker, "watermarks");
    (0..PARTITIONS)
        .map(|p| c.fetch_watermarks(topic, p, TIMEOUT).expect("watermarks").1)
        .collect()
}

fn members_join_leave_and_die(strategy: &str) {
    let broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let topic = format!("rk-members-{strategy}");
    let group = topic.clone();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    create_topic(&rt, &broker, &topic, PARTITIONS);
    let mut produced = produce(&rt, &broker, &topic, PARTITIONS, "first", 300);
    let monitor = CommitMonitor::start(&broker, &group, &topic);
    let args = ["--strategy", strategy, "--session-timeout-ms", "6000"];

    // Members join one by one; each stage is a later generation.
    let mut a = Member::spawn("a", &broker, &group, &topic, &args);
    wait_for("a owns every partition", &broker, &[&a], || {
        shared_generation(&[&a]).is_some()
    });
    let g1 = shared_generation(&[&a]);
    let mut b = Member::spawn("b", &broker, &group, &topic, &args);
    wait_for("a and b share the partitions", &broker, &[&a, &b], || {
        shared_generation(&[&a, &b]).is_some()
    });
    let g2 = shared_generation(&[&a, &b]);
    let mut c = Member::spawn("c", &broker, &group, &topic, &args);
    wait_for(
        "a, b and c share the partitions",
        &broker,
        &[&a, &b, &c],
        || shared_generation(&[&a, &b, &c]).is_some(),
    );
    let g3 = shared_generation(&[&a, &b, &c]);
    produced.extend(produce(&rt, &broker, &topic, PARTITIONS, "second", 300));

    // b leaves cleanly; its partitions resume where it committed. The
    // survivors' marks are taken before b leaves, b's once it has exited.
    let b_owned = b.owned().map(|(_, p)| p).unwrap_or_default();
    let mut after_b = mark(&[&a, &b, &c]);
    b.close();
    after_b.0[1] = b.events().len();
    wait_for(
        "a and c share the partitions",
        &broker,
        &[&a, &b, &c],
        || shared_generation(&[&a, &c]).is_some_and(|g| Some(g) > g3),
    );
    let g4 = shared_generation(&[&a, &c]);
    let all_so_far: HashSet<String> = produced.iter().cloned().collect();
    wait_for(
        "every record so far consumed, commits answered",
        &broker,
        &[&a, &b, &c],
        || {
            consumed(&[&a, &b, &c]).is_superset(&all_so_far)
                && commits_settled(&a)
                && commits_settled(&c)
        },
    );

    // c dies without leaving (it is idle: every record it read is
    // committed); after its session timeout a takes everything.
    let c_owned = c.owned().map(|(_, p)| p).unwrap_or_default();
    let mut after_c = mark(&[&a, &b, &c]);
    c.kill();
    after_c.0[2] = c.events().len();
    produced.extend(produce(&rt, &broker, &topic, PARTITIONS, "third", 300));
    let all_so_far: HashSet<String> = produced.iter().cloned().collect();
    wait_for(
        "a alone owns every partition and read every record",
        &broker,
        &[&a, &b, &c],
        || {
            shared_generation(&[&a]).is_some_and(|g| Some(g) > g4)
                && consumed(&[&a, &b, &c]).is_superset(&all_so_far)
                && commits_settled(&a)
        },
    );
    let g5 = shared_generation(&[&a]);
    a.close();

    // A member stops part way; a restarted one resumes at the commits.
    produced.extend(produce(&rt, &broker, &topic, PARTITIONS, "fourth", 120));
    let mut a2 = Member::spawn(
        "a2",
        &broker,
        &group,
        &topic,
        &[&args[..], &["--max-records", "50"]].concat(),
    );
    let status = a2.wait_exit();
    assert!(
        status.success() && a2.events().last() == Some(&Event::Closed),
        "a2 stops after 50 records\n{}",
        a2.describe()
    );
    let a2_read = a2
        .events()
        .iter()
        .filter(|e| matches!(e, Event::Rec { .. }))
        .count();
    assert_eq!(a2_read, 50, "{}", a2.describe());
    let after_a2 = mark(&[&a, &b, &c, &a2]);
    let mut a3 = Member::spawn("a3", &broker, &group, &topic, &args);
    let everything: HashSet<String> = produced.iter().cloned().collect();
    let all = [&a, &b, &c, &a2, &a3];
    wait_for("every record consumed", &broker, &all, || {
        consumed(&all).is_superset(&everything) && commits_settled(&a3)
    });
    let end = high_watermarks(&broker, &topic);
    assert_eq!(end.iter().sum::<i64>(), produced.len() as i64);
    let fetch = offsets_client(&broker, &group);
    wait_for("committed offsets reach the log end", &broker, &all, || {
        committed_now(&fetch, &topic).as_ref() == Some(&end)
    });

    let resumed_b =
        assert_resumed_at_commit("after b left", &broker, &all, &after_b, &b_owned, &end);
    let resumed_c = assert_resumed_at_commit(
        "after c was killed",
        &broker,
        &all,
        &after_c,
        &c_owned,
        &end,
    );
    let everyone: BTreeSet<i32> = (0..PARTITIONS).collect();
    let resumed_a3 = assert_resumed_at_commit(
        "restarted member",
        &broker,
        &all,
        &after_a2,
        &everyone,
        &end,
    );
    // Records were produced after every hand-over, so each handed partition
    // had something to resume; a2 read 50 of 120 so some partitions were
    // left part way.
    assert_eq!(resumed_b, b_owned.len());
    assert_eq!(resumed_c, c_owned.len());
    assert!(resumed_a3 > 0, "a2 left no partition part way");

    let samples = monitor.finish();
    assert!(
        samples.len() > 10,
        "too few OffsetFetch answers: {samples:?}"
    );
    assert_ne!(
        samples.first(),
        samples.last(),
        "the polled commits never moved"
    );
    assert_never_backwards(&samples);
    let generations = assert_single_owner(&broker, &all);
    let stages = [g1, g2, g3, g4, g5];
    assert!(
        stages.windows(2).all(|w| w[0] < w[1]),
        "each stage is a later generation: {stages:?}"
    );
    println!(
        "{strategy}: {} records produced, {} distinct read, {generations} generations, \
         {} OffsetFetch answers, resumed at commit: {resumed_b} after leave, {resumed_c} after kill, \
         {resumed_a3} after restart",
        produced.len(),
        consumed(&all).len(),
        samples.len()
    );
    a3.close();
}

#[test]
fn rdkafka_members_join_leave_and_die_range() {
    members_join_leave_and_die("range");
}

#[test]
fn rdkafka_members_join_leave_and_die_roundrobin() {
    members_join_leave_and_die("roundrobin");
}

#[test]
fn rdkafka_members_join_leave_and_die_cooperative_sticky() {
    members_join_leave_and_die("cooperative-sticky");
}

#[test]
fn rdkafka_static_member_restarts_without_rebalance() {
    // With a metrics listener: the test counts the members' heartbeats.
    let broker = WeirProcess::start_with_args(&["--set", "http.listeners=127.0.0.1:0"])
        .unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let topic = "rk-static";
    let group = "rk-static";
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    create_topic(&rt, &broker, topic, PARTITIONS);
    let mut produced = produce(&rt, &broker, topic, PARTITIONS, "before", 60);
    // The session timeout is far longer than the restart takes.
    let args = |id: &'static str| ["--instance-id", id, "--session-timeout-ms", "30000"];
    let mut s1 = Member::spawn("s1", &broker, group, topic, &args("s1"));
    let s2 = Member::spawn("s2", &broker, group, topic, &args("s2"));
    let everything: HashSet<String> = produced.iter().cloned().collect();
    wait_for(
        "s1 and s2 share the partitions and read every record",
        &broker,
        &[&s1, &s2],
        || {
            shared_generation(&[&s1, &s2]).is_some()
                && consumed(&[&s1, &s2]).is_superset(&everything)
                && commits_settled(&s1)
        },
    );
    let (generation, s1_owned) = s1.owned().expect("s1 owns partitions");
    let s2_before = s2.owned();

    // SIGKILL: a static member never sends LeaveGroup anyway.
    let mut before = mark(&[&s1, &s2]);
    s1.kill();
    before.0[0] = s1.events().len();
    let s1b = Member::spawn("s1-restarted", &broker, group, topic, &args("s1"));
    produced.extend(produce(&rt, &broker, topic, PARTITIONS, "after", 60));
    let everything: HashSet<String> = produced.iter().cloned().collect();
    let all = [&s1, &s2, &s1b];
    wait_for(
        "the restarted member owns partitions and every record is read",
        &broker,
        &all,
        || {
            s1b.owned().is_some_and(|(_, p)| !p.is_empty())
                && consumed(&all).is_superset(&everything)
                && commits_settled(&s1b)
        },
    );
    assert_eq!(
        s1b.owned(),
        Some((generation, s1_owned.clone())),
        "the restarted static member rejoins generation {generation} with its partitions\n{}",
        diagnostics(&broker, &all)
    );
    let joined: Vec<Event> = s1b
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::Joined { .. }))
        .collect();
    assert_eq!(
        joined,
        vec![Event::Joined { generation }],
        "{}",
        diagnostics(&broker, &all)
    );
    // Both members keep heartbeating (every 500 ms); a rebalance would be
    // announced to them as REBALANCE_IN_PROGRESS and make them rejoin. Wait
    // until the broker has answered at least three heartbeats of each since
    // the restarted member settled, so one would have been noticed.
    let heartbeats = |broker: &WeirProcess| {
        broker
            .metric("weir_requests_total", &[("api", "Heartbeat")])
            .unwrap_or_else(|e| panic!("metrics: {e}"))
    };
    let rebalance_answers = |broker: &WeirProcess| {
        broker
            .metric(
                "weir_request_errors_total",
                &[("api", "Heartbeat"), ("error", "REBALANCE_IN_PROGRESS")],
            )
            .unwrap_or_else(|e| panic!("metrics: {e}"))
    };
    let heartbeats_before = heartbeats(&broker);
    let rebalances_before = rebalance_answers(&broker);
    wait_for("six more heartbeats", &broker, &all, || {
        heartbeats(&broker) >= heartbeats_before + 6.0
    });
    assert_eq!(
        rebalance_answers(&broker),
        rebalances_before,
        "a heartbeat was answered REBALANCE_IN_PROGRESS after the static restart\n{}",
        diagnostics(&broker, &all)
    );
    let s2_after: Vec<Event> = s2.events()[before.0[1]..]
        .iter()
        .filter(|e| matches!(e, Event::Joined { .. } | Event::Own { .. }))
        .cloned()
        .collect();
    assert!(
        s2_after.is_empty() && s2.owned() == s2_before,
        "the other member saw a rebalance: {s2_after:?}\n{}",
        diagnostics(&broker, &all)
    );
    let end = high_watermarks(&broker, topic);
    let resumed =
        assert_resumed_at_commit("static restart", &broker, &all, &before, &s1_owned, &end);
    assert_eq!(resumed, s1_owned.len());
    assert_single_owner(&broker, &all);
}

/// Per partition: the highest acknowledged commit and the offset after the
/// last record read, over `m`'s events.
fn acked_and_read(m: &Member) -> (BTreeMap<i32, i64>, BTreeMap<i32, i64>) {
    let (mut acked, mut read) = (BTreeMap::new(), BTreeMap::new());
    for e in m.events() {
        match e {
            Event::Commit { partition, offset } => {
                let a = acked.entry(partition).or_insert(offset);
                *a = (*a).max(offset);
            }
            Event::Rec {
                partition, offset, ..
            } => {
                let r = read.entry(partition).or_insert(offset + 1);
                *r = (*r).max(offset + 1);
            }
            _ => {}
        }
    }
    (acked, read)
}

/// The smallest offset `m` read per partition.
fn first_reads(m: &Member) -> BTreeMap<i32, i64> {
    let mut first = BTreeMap::new();
    for e in m.events() {
        if let Event::Rec {
            partition, offset, ..
        } = e
        {
            let f = first.entry(partition).or_insert(offset);
            *f = (*f).min(offset);
        }
    }
    first
}

/// The broker is stopped (SIGTERM, then SIGKILL) while a member reads and
/// commits: after each restart every acknowledged commit is there (the
/// committed offset is at least the last acknowledged one and at most one
/// past the last record read), and the next member resumes exactly there.
#[test]
fn rdkafka_commits_survive_broker_restart_mid_stream() {
    let mut broker = WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"));
    let topic = "rk-broker-restart";
    let group = "rk-broker-restart";
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    create_topic(&rt, &broker, topic, PARTITIONS);
    produce(&rt, &broker, topic, PARTITIONS, "first", 1200);
    let args = ["--session-timeout-ms", "6000"];
    // Committed offsets found after the previous restart (-1: none).
    let mut resume_at: Option<Vec<i64>> = None;
    for (round, how) in ["SIGTERM", "SIGKILL"].into_iter().enumerate() {
        let mut m = Member::spawn(&format!("m{round}"), &broker, group, topic, &args);
        wait_for("the member commits 100 records", &broker, &[&m], || {
            m.events()
                .iter()
                .filter(|e| matches!(e, Event::Commit { .. }))
                .count()
                >= 100
        });
        match how {
            "SIGTERM" => broker.stop().unwrap_or_else(|e| panic!("clean stop: {e}")),
            _ => broker
                .kill_hard()
                .unwrap_or_else(|e| panic!("SIGKILL of the broker: {e}")),
        }
        // The member cannot follow the broker to its new port.
        m.kill();
        broker
            .restart()
            .unwrap_or_else(|e| panic!("weir did not start again after {how}: {e}"));
        if let Some(resume_at) = &resume_at {
            for (p, first) in first_reads(&m) {
                assert_eq!(
                    first,
                    resume_at[p as usize].max(0),
                    "partition {p}: {} did not start at the offset committed before the restart ({resume_at:?})\n{}",
                    m.name,
                    diagnostics(&broker, &[&m])
                );
            }
        }
        let (acked, read) = acked_and_read(&m);
        let committed = committed_now(&offsets_client(&broker, group), topic)
            .expect("OffsetFetch after restart");
        for p in 0..PARTITIONS {
            let c = committed[p as usize];
            let low = acked
                .get(&p)
                .copied()
                .or(resume_at.as_ref().map(|r| r[p as usize]));
            let high = read.get(&p).copied().unwrap_or(c);
            assert!(
                low.unwrap_or(-1) <= c && c <= high,
                "after {how}: partition {p} committed {c}, acknowledged {low:?}, read up to {high}\n{}",
                diagnostics(&broker, &[&m])
            );
        }
        assert!(
            !acked.is_empty(),
            "after {how}: no commit was acknowledged before the stop"
        );
        println!(
            "after {how}: committed {committed:?} (acknowledged {acked:?}, read up to {read:?})"
        );
        resume_at = Some(committed);
    }
}
