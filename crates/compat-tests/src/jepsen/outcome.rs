//! [`Outcome`]: what a run found, and its printed summary.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Config, Event, Fault, MIN_INSYNC_REPLICAS, REPLICATION_FACTOR, Report};

/// Everything a run found.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub config: Config,
    /// The faults that ran (partition drops out without namespaces).
    pub faults: Vec<Fault>,
    /// `"netns"` or `"loopback"`.
    pub network: &'static str,
    pub report: Report,
    pub events: Vec<Event>,
    /// Faults injected, per kind.
    pub injected: Vec<(Fault, usize)>,
    /// Acknowledged records sent after the first fault.
    pub acked_after_first_fault: usize,
    /// Failed deliveries by partition and error: how many, the first and
    /// the last (seconds since the nemesis started).
    pub failures: BTreeMap<String, (usize, f64, f64)>,
    /// Fatal errors of the idempotent producer.
    pub producer_fatal: Vec<String>,
    pub consumer_errors: usize,
    /// Nodes that exited without being told to (nemesis time, node, exit
    /// status); each was started again.
    pub exits: Vec<(Duration, i32, String)>,
    pub elapsed: Duration,
    /// The nodes' log tails when there were anomalies.
    pub logs: String,
    /// The nodes' directories (data, `node.log`), left behind when there
    /// were anomalies or with `WEIR_JEPSEN_KEEP` set.
    pub kept: Vec<std::path::PathBuf>,
}

impl Outcome {
    /// Faults of kind `fault` injected.
    pub fn injected(&self, fault: Fault) -> usize {
        self.injected
            .iter()
            .find(|(f, _)| *f == fault)
            .map_or(0, |(_, n)| *n)
    }

    /// The configuration, the nemesis's counts and a table of results.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let r = &self.report;
        let mut out = format!(
            "jepsen: {} nodes ({}), {} partitions, RF={REPLICATION_FACTOR}, min.insync.replicas={MIN_INSYNC_REPLICAS}, unclean election off, flush.messages={}, acks=all idempotent, {}/s, {} consumers\n\
             jepsen: seed {} (WEIR_JEPSEN_SEED), nemesis {:.0?} of [{}], run {:.1?}\n",
            c.nodes,
            self.network,
            c.partitions,
            if c.flush_every_message { "1" } else { "off" },
            c.rate_per_sec,
            c.consumers,
            c.seed,
            c.duration,
            c.faults_text(&self.faults),
            self.elapsed,
        );
        let injected: Vec<String> = self
            .injected
            .iter()
            .map(|(f, n)| format!("{f} {n}"))
            .collect();
        out.push_str(&format!(
            "jepsen: faults injected: {}\n",
            injected.join(", ")
        ));
        let rows: [(&str, String); 15] = [
            ("sent", r.sent.to_string()),
            ("acknowledged", r.acked.to_string()),
            (
                "acknowledged without an offset (implicit ack)",
                r.acked_without_offset.to_string(),
            ),
            (
                "acknowledged, sent after the first fault",
                self.acked_after_first_fault.to_string(),
            ),
            ("failed (indeterminate)", r.failed.to_string()),
            (
                "failed, in the log anyway",
                r.failed_but_present.to_string(),
            ),
            ("unresolved", r.unresolved.to_string()),
            ("records in the final log", r.final_records.to_string()),
            ("records read by consumers", r.consumer_reads.to_string()),
            (
                "producer fatal errors",
                self.producer_fatal.len().to_string(),
            ),
            (
                "LOST (acknowledged, not in the log)",
                r.lost.len().to_string(),
            ),
            ("DUPLICATED", r.duplicated.len().to_string()),
            (
                "WRONG OFFSET (acknowledged elsewhere)",
                r.wrong_offset.len().to_string(),
            ),
            (
                "READ, THEN LOST (read above the HW)",
                r.read_then_lost.len().to_string(),
            ),
            ("UNKNOWN VALUES", r.unknown.len().to_string()),
        ];
        out.push_str("| check | count |\n| --- | ---: |\n");
        for (what, n) in rows {
            out.push_str(&format!("| {what} | {n} |\n"));
        }
        for (error, (n, first, last)) in &self.failures {
            out.push_str(&format!(
                "jepsen: {n} deliveries failed ({first:.1}s to {last:.1}s) with {error}\n"
            ));
        }
        for (at, id, status) in &self.exits {
            out.push_str(&format!(
                "jepsen: node {id} EXITED ON ITS OWN at {:.1}s ({status}); started again\n",
                at.as_secs_f64()
            ));
        }
        if self.consumer_errors > 0 {
            out.push_str(&format!(
                "jepsen: the consumers polled {} errors (retried)\n",
                self.consumer_errors
            ));
        }
        for e in &self.producer_fatal {
            out.push_str(&format!("jepsen: producer fatal error: {e}\n"));
        }
        for line in r.examples(10) {
            out.push_str(&format!("jepsen: ANOMALY {line}\n"));
        }
        for dir in &self.kept {
            out.push_str(&format!("jepsen: kept {}\n", dir.display()));
        }
        out
    }

    /// The nemesis's events, one per line.
    pub fn event_log(&self) -> String {
        self.events
            .iter()
            .map(|e| format!("{:>7.1}s {}: {}", e.at.as_secs_f64(), e.fault, e.what))
            .collect::<Vec<_>>()
            .join("\n")
    }
}
