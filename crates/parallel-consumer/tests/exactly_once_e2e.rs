//! Exactly-once end to end against a `weir serve` process: consumer
//! processes (`examples/eos_worker`) read an input topic of unique keyed
//! records in exactly-once mode and write one output per input. A process
//! is killed with SIGKILL in the middle of a transaction twice (first
//! alone, then while a second process shares the group), each time
//! restarted with the same `transactional.id`, until the whole input is
//! committed. Then the output topic, read with read_committed, holds every
//! input exactly once (no duplicate, no gap) and every key's outputs in
//! input order; read with read_uncommitted it also holds the killed
//! transactions' outputs (so the kills did land with outputs written).
//!
//! How a kill lands mid-transaction without timing: the worker's
//! transaction observer, at the first transaction from the
//! `WEIR_PC_HOLD_AT`-th on that writes outputs, prints `holding <txn>
//! <outputs>` after the outputs were acknowledged and the offsets sent, and
//! then blocks the owner thread; the test waits for that line (with a
//! deadline) and kills the process.

use crate::common;
use crate::exactly_once::{assert_key_order, not_exactly_once, produce_keyed, read_all};

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::TestBroker;
use weir_compat_tests::WeirProcess;

const PARTITIONS: i32 = 4;
const OUTPUT_PARTITIONS: i32 = 3;
const PER_PARTITION: usize = 3_000;
const KEYS_PER_PARTITION: usize = 8;
const LINE_WAIT: Duration = Duration::from_secs(90);
const CONSUME_WAIT: Duration = Duration::from_secs(180);
const STOP_WAIT: Duration = Duration::from_secs(40);

struct Setup<'a> {
    bin: &'a Path,
    bootstrap: &'a str,
    input: &'a str,
    output: &'a str,
    group: &'a str,
    dir: &'a Path,
}

/// One consumer process; its standard output lines are collected.
struct Worker {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: PathBuf,
    killed: bool,
}

impl Worker {
    fn spawn(s: &Setup<'_>, name: &str, txn_id: &str, hold_at: Option<u64>) -> Worker {
        let stderr = s.dir.join(format!("{name}.stderr"));
        let mut cmd = Command::new(s.bin);
        cmd.env("WEIR_BOOTSTRAP", s.bootstrap)
            .env("WEIR_INPUT", s.input)
            .env("WEIR_OUTPUT", s.output)
            .env("WEIR_GROUP", s.group)
            .env("WEIR_TXN_ID", txn_id)
            .env(
                "WEIR_PC_SEED",
                name.bytes()
                    .fold(17u64, |h, c| h.wrapping_mul(31) + u64::from(c))
                    .to_string(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        if let Some(n) = hold_at {
            cmd.env("WEIR_PC_HOLD_AT", n.to_string());
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", s.bin.display()));
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let stdout = child.stdout.take().expect("stdout");
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Worker {
            name: name.to_string(),
            child,
            lines,
            stderr,
            killed: false,
        }
    }

    /// Waits for a line starting with `prefix`, failing if the process
    /// exits or the deadline passes.
    fn wait_line(&mut self, prefix: &str) -> String {
        let deadline = Instant::now() + LINE_WAIT;
        loop {
            if let Some(l) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.starts_with(prefix))
            {
                return l.clone();
            }
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!(
                    "{} exited ({status}) before printing {prefix:?}\n{}",
                    self.name,
                    self.stderr_tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} did not print {prefix:?}\n{}",
                self.name,
                self.stderr_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no shutdown, no abort, no final transaction.
    fn kill(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
        self.killed = true;
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let start = text.len().saturating_sub(4000);
        let start = (start..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        format!("--- {} stderr ---\n{}", self.name, &text[start..])
    }

    /// Transactions this process committed.
    fn committed(&self) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("committed "))
            .count()
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

/// Outputs of a `holding <txn> <outputs>` line.
fn held_outputs(line: &str) -> usize {
    line.split(' ')
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad line {line:?}"))
}

/// Waits until the process holds a transaction (the first from its
/// `hold_at`-th on that writes outputs), checks it is open with outputs
/// written, kills the process. Returns the held outputs.
fn kill_mid_transaction(w: &mut Worker, hold_at: u64) -> usize {
    let line = w.wait_line("holding ");
    let outputs = held_outputs(&line);
    assert!(
        outputs > 0,
        "{}: the held transaction wrote nothing ({line:?})",
        w.name
    );
    assert!(
        w.committed() >= 1,
        "{}: no transaction committed before the held one",
        w.name
    );
    w.kill();
    eprintln!(
        "killed {} in transaction {} (held from {hold_at} on) with {outputs} outputs written, after {} committed transactions",
        w.name,
        line.split(' ').nth(1).unwrap_or("?"),
        w.committed()
    );
    outputs
}

fn diagnose(workers: &[&Worker], committed: &[Option<i64>]) -> String {
    let mut s = format!("committed {committed:?}\n");
    for w in workers {
        s.push_str(&w.stderr_tail());
        s.push('\n');
    }
    s
}

#[test]
fn exactly_once_across_kills_in_the_middle_of_a_transaction() {
    let weir = WeirProcess::start_with_args(&["--set", "group.initial.rebalance.delay.ms=0"])
        .unwrap_or_else(|e| panic!("weir: {e}"));
    let broker = TestBroker::Weir(weir);
    let b = &broker.bootstrap();
    let rt = common::runtime();
    let (input, output, group) = (
        common::unique("eos-e2e-in"),
        common::unique("eos-e2e-out"),
        common::unique("eos-e2e-g"),
    );
    broker.create_topic(&rt, &input, PARTITIONS);
    broker.create_topic(&rt, &output, OUTPUT_PARTITIONS);
    let started = Instant::now();
    let want = produce_keyed(b, &input, PARTITIONS, PER_PARTITION, KEYS_PER_PARTITION);
    let bin = common::example_binary("eos_worker", "WEIR_PC_EOS_WORKER");
    let dir = tempfile::tempdir().expect("tempdir");
    let setup = Setup {
        bin: &bin,
        bootstrap: b,
        input: &input,
        output: &output,
        group: &group,
        dir: dir.path(),
    };
    let txn_a = common::unique("txn-a");

    // 1. Alone: killed in its third transaction.
    let mut a1 = Worker::spawn(&setup, "a1", &txn_a, Some(3));
    let mut aborted = kill_mid_transaction(&mut a1, 3);

    // 2. Restarted next to a second process: killed in its third
    //    transaction again, while the other one runs.
    let mut a2 = Worker::spawn(&setup, "a2", &txn_a, Some(3));
    let mut b1 = Worker::spawn(&setup, "b1", &common::unique("txn-b"), None);
    aborted += kill_mid_transaction(&mut a2, 3);

    // 3. Restarted once more; runs to the end with the second process.
    let mut a3 = Worker::spawn(&setup, "a3", &txn_a, None);
    let deadline = started + CONSUME_WAIT;
    loop {
        let committed: Vec<Option<i64>> = (0..PARTITIONS)
            .map(|p| common::committed(b, &group, &input, p).map(|(o, _)| o))
            .collect();
        if committed.iter().all(|o| *o == Some(PER_PARTITION as i64)) {
            break;
        }
        for w in [&mut a3, &mut b1] {
            if let Some(status) = w.child.try_wait().expect("try_wait") {
                panic!("{} exited early ({status})\n{}", w.name, w.stderr_tail());
            }
        }
        assert!(
            Instant::now() < deadline,
            "gave up waiting for the input to be committed\n{}",
            diagnose(&[&a3, &b1], &committed)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("input committed after {:?}", started.elapsed());
    // Clean stop: end of standard input.
    for w in [&mut a3, &mut b1] {
        drop(w.child.stdin.take());
    }
    let stop_deadline = Instant::now() + STOP_WAIT;
    for w in [&mut a3, &mut b1] {
        let status = loop {
            if let Some(status) = w.child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                Instant::now() < stop_deadline,
                "{} did not stop\n{}",
                w.name,
                w.stderr_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.success(),
            "{} failed: {status}\n{}",
            w.name,
            w.stderr_tail()
        );
    }

    let committed_output = read_all(b, &output, OUTPUT_PARTITIONS, "read_committed");
    assert_eq!(
        not_exactly_once(&want, &committed_output),
        vec![],
        "inputs not exactly once in the committed output (payload, times)"
    );
    assert_key_order(&committed_output);
    let all_output = read_all(b, &output, OUTPUT_PARTITIONS, "read_uncommitted");
    assert!(
        all_output.len() >= want.len() + aborted,
        "the killed transactions' {aborted} outputs are not in the log: {} records for {} inputs",
        all_output.len(),
        want.len()
    );
    eprintln!(
        "{} inputs, {} outputs committed, {} in the log ({} of them from the two killed transactions), {:?} in all",
        want.len(),
        committed_output.len(),
        all_output.len(),
        aborted,
        started.elapsed()
    );
}
