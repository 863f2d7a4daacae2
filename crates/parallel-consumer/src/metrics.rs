//! The consumer's metrics: counters over its life, a histogram of handler
//! attempt durations and per-partition gauges, as a [`ConsumerMetrics`]
//! snapshot ([`crate::driver::ParallelConsumer::metrics`]), in the
//! Prometheus text format ([`render_prometheus_metrics`]) and, with the
//! cargo feature `metrics`, through the `metrics` crate's facade to
//! whatever recorder the application installed.
//!
//! The workers count each attempt and each record's outcome in atomics
//! (no lock, no allocation per record: one clock read before and after an
//! attempt and a few relaxed additions). With the feature on they also
//! push each event to facade handles registered once, when the consumer
//! starts; the per-partition gauges are state of the owner thread, not
//! events, and go to the facade when the application calls
//! `ParallelConsumer::publish_metrics` (feature `metrics`).
//!
//! docs/parallel-consumer.md ("Metrics") lists every metric.

mod counters;
#[cfg(feature = "metrics")]
mod facade;
#[cfg(all(test, feature = "metrics"))]
mod test_recorder;

use std::fmt::Write;

use crate::engine::PartitionStats;
pub(crate) use counters::Counters;
#[cfg(feature = "metrics")]
pub(crate) use facade::publish_partitions;

/// Upper bounds (seconds) of the handler latency histogram's buckets: the
/// Prometheus client defaults widened to 0.5 ms .. 30 s. Above the last
/// one is the `+Inf` bucket.
pub const HANDLER_SECONDS_BUCKETS: [f64; 15] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Counter: records whose handler succeeded.
pub const RECORDS_PROCESSED: &str = "weir_pc_records_processed_total";
/// Counter: handler attempts that failed (an error or a panic).
pub const ATTEMPTS_FAILED: &str = "weir_pc_attempts_failed_total";
/// Counter: attempts made after a failed one.
pub const RETRIES: &str = "weir_pc_retries_total";
/// Counter: records that failed for good and were resolved by a
/// dead-letter copy.
pub const RECORDS_DEAD_LETTERED: &str = "weir_pc_records_dead_lettered_total";
/// Counter: dead-letter copies that could not be written.
pub const DEAD_LETTER_ERRORS: &str = "weir_pc_dead_letter_errors_total";
/// Counter: records that failed for good and stopped their partition.
pub const RECORDS_FAILED: &str = "weir_pc_records_failed_total";
/// Counter: records whose work ended unresolved because their partition
/// was revoked or lost (they run again on its next owner).
pub const RECORDS_CANCELLED: &str = "weir_pc_records_cancelled_total";
/// Histogram: the duration of each handler attempt, in seconds.
pub const HANDLER_SECONDS: &str = "weir_pc_handler_seconds";
/// Gauge per partition: delivered records not yet behind the completion
/// watermark (`position - effect_watermark`).
pub const WATERMARK_LAG: &str = "weir_pc_watermark_lag";

/// The consumer's metrics at one moment ([`crate::driver::ParallelConsumer::metrics`]).
///
/// The counters count from the consumer's start and only grow. Each
/// attempt is counted once, as processed (it succeeded) or failed, and is
/// one observation of [`ConsumerMetrics::handler_seconds`]; so the
/// histogram's count is `records_processed + attempts_failed` (with a
/// batch handler an attempt is a call, and a successful call counts all
/// its records as processed). Each run
/// of a record counts its outcome once: processed, dead-lettered, failed
/// or cancelled (a record that runs again, on a new owner or after an
/// aborted transaction, counts again). Counters are read one after the other while workers run, so
/// two of them may be a few events apart.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsumerMetrics {
    /// Records whose handler succeeded ([`RECORDS_PROCESSED`]).
    pub records_processed: u64,
    /// Handler attempts that failed, retried or not ([`ATTEMPTS_FAILED`]).
    pub attempts_failed: u64,
    /// Attempts made after a failed attempt of the same record
    /// ([`RETRIES`]).
    pub retries: u64,
    /// Records resolved by their dead-letter copy ([`RECORDS_DEAD_LETTERED`];
    /// in exactly-once mode: copies handed to the transaction).
    pub records_dead_lettered: u64,
    /// Dead-letter copies whose write failed; each such record also counts
    /// in `records_failed` ([`DEAD_LETTER_ERRORS`]).
    pub dead_letter_errors: u64,
    /// Records that failed for good and stopped their partition
    /// ([`RECORDS_FAILED`]).
    pub records_failed: u64,
    /// Records whose handler failed or waited for a retry when their
    /// partition went: neither retried nor resolved here
    /// ([`RECORDS_CANCELLED`]).
    pub records_cancelled: u64,
    /// The duration of every handler attempt ([`HANDLER_SECONDS`]).
    pub handler_seconds: HistogramSnapshot,
    /// The owned partitions' observations (lag: [`watermark_lag`]).
    pub partitions: Vec<PartitionStats>,
}

/// A histogram's buckets at one moment.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HistogramSnapshot {
    /// The buckets' upper bounds in seconds, increasing
    /// ([`HANDLER_SECONDS_BUCKETS`]).
    pub bounds: &'static [f64],
    /// Observations per bucket, not cumulative: `counts[i]` were above
    /// `bounds[i - 1]` and at most `bounds[i]`; the last entry (one more
    /// than `bounds`) counts those above every bound.
    pub counts: Vec<u64>,
    /// The sum of the observations, in seconds.
    pub sum_seconds: f64,
}

impl HistogramSnapshot {
    /// The number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(upper bound, observations at or below it)` for each bound, then
    /// `(f64::INFINITY, count)`: Prometheus' `le` buckets.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let bounds = self.bounds.iter().copied().chain([f64::INFINITY]);
        bounds.zip(&self.counts).scan(0u64, |total, (bound, n)| {
            *total += n;
            Some((bound, *total))
        })
    }
}

/// How far the completion watermark is behind the position: delivered
/// records of the partition not yet part of the completed prefix (running,
/// waiting, or done above an unfinished one).
pub fn watermark_lag(s: &PartitionStats) -> i64 {
    s.position.saturating_sub(s.effect_watermark).max(0)
}

/// A per-partition metric: name, help, Prometheus type, value (`None`:
/// not rendered), and whether it is zeroed in the `metrics` facade once
/// the partition is no longer owned (work this consumer no longer holds),
/// rather than left at its last value.
pub(crate) struct PartitionFamily {
    pub name: &'static str,
    pub help: &'static str,
    pub counter: bool,
    pub value: fn(&PartitionStats) -> Option<i64>,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub zero_when_gone: bool,
}

const fn gauge(
    name: &'static str,
    help: &'static str,
    value: fn(&PartitionStats) -> Option<i64>,
    zero_when_gone: bool,
) -> PartitionFamily {
    PartitionFamily {
        name,
        help,
        counter: false,
        value,
        zero_when_gone,
    }
}

pub(crate) const PARTITION_FAMILIES: [PartitionFamily; 12] = [
    gauge(
        "weir_pc_position",
        "Offset after the last record delivered to the application",
        |s| Some(s.position),
        false,
    ),
    gauge(
        "weir_pc_committed_offset",
        "Last commit confirmed by the group coordinator",
        |s| s.committed,
        false,
    ),
    gauge(
        "weir_pc_effect_watermark",
        "One past the longest completed prefix of delivered records",
        |s| Some(s.effect_watermark),
        false,
    ),
    gauge(
        WATERMARK_LAG,
        "Delivered records not yet behind the completion watermark (position - effect watermark)",
        |s| Some(watermark_lag(s)),
        true,
    ),
    gauge(
        "weir_pc_in_flight",
        "Delivered records not finished",
        |s| Some(s.in_flight as i64),
        true,
    ),
    gauge(
        "weir_pc_waiting",
        "Delivered records waiting for a worker",
        |s| Some(s.waiting as i64),
        true,
    ),
    gauge(
        "weir_pc_failed",
        "Records whose handler failed every attempt",
        |s| Some(s.failed as i64),
        true,
    ),
    gauge(
        "weir_pc_oldest_unfinished_age_ms",
        "Age of the oldest unfinished delivered record",
        |s| Some(s.oldest_unfinished_age_ms.unwrap_or(0)),
        true,
    ),
    gauge(
        "weir_pc_paused",
        "Fetching paused (1) or not (0)",
        |s| Some(i64::from(s.paused)),
        true,
    ),
    gauge(
        "weir_pc_stopped",
        "Partition stopped by the failure policy",
        |s| Some(i64::from(s.stopped)),
        true,
    ),
    gauge(
        "weir_pc_commits_stopped",
        "Commits stopped by an ownership error",
        |s| Some(i64::from(s.commits_stopped)),
        true,
    ),
    PartitionFamily {
        name: "weir_pc_stale_results_total",
        help: "Results of an earlier assignment of the partition discarded",
        counter: true,
        value: |s| Some(i64::try_from(s.stale_results).unwrap_or(i64::MAX)),
        zero_when_gone: false,
    },
];

/// Renders `stats` as Prometheus text exposition (one family per field,
/// labelled by topic and partition). [`render_prometheus_metrics`] adds
/// the counters and the latency histogram.
pub fn render_prometheus(stats: &[PartitionStats]) -> String {
    let mut out = String::new();
    for f in &PARTITION_FAMILIES {
        let kind = if f.counter { "counter" } else { "gauge" };
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {kind}", f.name);
        for s in stats {
            if let Some(v) = (f.value)(s) {
                let _ = writeln!(
                    out,
                    "{}{{topic=\"{}\",partition=\"{}\"}} {v}",
                    f.name,
                    escape(&s.topic),
                    s.partition
                );
            }
        }
    }
    out
}

/// A consumer-wide counter: name, help, value.
type CounterFamily = (&'static str, &'static str, fn(&ConsumerMetrics) -> u64);

const COUNTER_FAMILIES: [CounterFamily; 7] = [
    (RECORDS_PROCESSED, "Records whose handler succeeded", |m| {
        m.records_processed
    }),
    (
        ATTEMPTS_FAILED,
        "Handler attempts that failed (error or panic)",
        |m| m.attempts_failed,
    ),
    (
        RETRIES,
        "Handler attempts made after a failed attempt",
        |m| m.retries,
    ),
    (
        RECORDS_DEAD_LETTERED,
        "Records that failed for good, resolved by a dead-letter copy",
        |m| m.records_dead_lettered,
    ),
    (
        DEAD_LETTER_ERRORS,
        "Dead-letter copies that could not be written",
        |m| m.dead_letter_errors,
    ),
    (
        RECORDS_FAILED,
        "Records that failed for good and stopped their partition",
        |m| m.records_failed,
    ),
    (
        RECORDS_CANCELLED,
        "Records left unresolved because their partition was revoked or lost",
        |m| m.records_cancelled,
    ),
];

/// The help text of each counter, by name (for the `metrics` facade's
/// descriptions).
#[cfg(feature = "metrics")]
pub(crate) fn counter_help(name: &str) -> &'static str {
    COUNTER_FAMILIES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map_or("", |(_, help, _)| help)
}

/// The help text of the handler latency histogram.
pub(crate) const HANDLER_SECONDS_HELP: &str = "Duration of each handler attempt in seconds";

/// Renders the whole snapshot as Prometheus text exposition: the counters,
/// the handler latency histogram, then [`render_prometheus`] of the
/// partitions.
pub fn render_prometheus_metrics(m: &ConsumerMetrics) -> String {
    let mut out = String::new();
    for (name, help, value) in COUNTER_FAMILIES {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        let _ = writeln!(out, "{name} {}", value(m));
    }
    let h = &m.handler_seconds;
    let name = HANDLER_SECONDS;
    let _ = writeln!(out, "# HELP {name} {HANDLER_SECONDS_HELP}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (bound, n) in h.cumulative() {
        if bound.is_infinite() {
            let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {n}");
        } else {
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {n}");
        }
    }
    let _ = writeln!(out, "{name}_sum {}", h.sum_seconds);
    let _ = writeln!(out, "{name}_count {}", h.count());
    out.push_str(&render_prometheus(&m.partitions));
    out
}

fn escape(label: &str) -> String {
    label
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Partition 0 of `t`: position 13, watermark and commit 10.
    pub(crate) fn stats() -> PartitionStats {
        PartitionStats {
            topic: "t".into(),
            partition: 0,
            generation: 1,
            position: 13,
            committed: Some(10),
            effect_watermark: 10,
            in_flight: 1,
            waiting: 0,
            failed: 0,
            tracked: 3,
            paused: true,
            stopped: false,
            commits_stopped: false,
            oldest_unfinished_age_ms: Some(250),
            skipped: 0,
            metadata_error: None,
            stale_results: 0,
        }
    }

    #[test]
    fn renders_each_partition_and_field() {
        let text = render_prometheus(&[stats()]);
        for line in [
            "weir_pc_position{topic=\"t\",partition=\"0\"} 13",
            "weir_pc_committed_offset{topic=\"t\",partition=\"0\"} 10",
            "weir_pc_effect_watermark{topic=\"t\",partition=\"0\"} 10",
            "weir_pc_in_flight{topic=\"t\",partition=\"0\"} 1",
            "weir_pc_oldest_unfinished_age_ms{topic=\"t\",partition=\"0\"} 250",
            "weir_pc_paused{topic=\"t\",partition=\"0\"} 1",
            "# TYPE weir_pc_position gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
    }

    #[test]
    fn the_lag_is_the_position_minus_the_watermark() {
        let text = render_prometheus(&[stats()]);
        assert!(
            text.lines()
                .any(|l| l == "weir_pc_watermark_lag{topic=\"t\",partition=\"0\"} 3"),
            "{text}"
        );
        let mut s = stats();
        s.effect_watermark = s.position;
        assert_eq!(watermark_lag(&s), 0);
    }

    fn snapshot() -> ConsumerMetrics {
        ConsumerMetrics {
            records_processed: 3,
            attempts_failed: 5,
            retries: 4,
            records_dead_lettered: 2,
            dead_letter_errors: 1,
            records_failed: 1,
            records_cancelled: 6,
            handler_seconds: HistogramSnapshot {
                bounds: &HANDLER_SECONDS_BUCKETS,
                counts: {
                    let mut c = vec![0; HANDLER_SECONDS_BUCKETS.len() + 1];
                    c[0] = 2; // <= 0.5 ms
                    c[10] = 5; // (0.5 s, 1 s]
                    c[15] = 1; // > 30 s
                    c
                },
                sum_seconds: 34.25,
            },
            partitions: vec![stats()],
        }
    }

    #[test]
    fn renders_the_counters_the_histogram_and_the_partitions() {
        let text = render_prometheus_metrics(&snapshot());
        for line in [
            "# TYPE weir_pc_records_processed_total counter",
            "weir_pc_records_processed_total 3",
            "weir_pc_attempts_failed_total 5",
            "weir_pc_retries_total 4",
            "weir_pc_records_dead_lettered_total 2",
            "weir_pc_dead_letter_errors_total 1",
            "weir_pc_records_failed_total 1",
            "weir_pc_records_cancelled_total 6",
            "# TYPE weir_pc_handler_seconds histogram",
            "weir_pc_handler_seconds_bucket{le=\"0.0005\"} 2",
            "weir_pc_handler_seconds_bucket{le=\"0.5\"} 2",
            "weir_pc_handler_seconds_bucket{le=\"1\"} 7",
            "weir_pc_handler_seconds_bucket{le=\"30\"} 7",
            "weir_pc_handler_seconds_bucket{le=\"+Inf\"} 8",
            "weir_pc_handler_seconds_sum 34.25",
            "weir_pc_handler_seconds_count 8",
            "weir_pc_watermark_lag{topic=\"t\",partition=\"0\"} 3",
            "# TYPE weir_pc_stale_results_total counter",
            "weir_pc_position{topic=\"t\",partition=\"0\"} 13",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
        }
        let buckets = text
            .lines()
            .filter(|l| l.starts_with("weir_pc_handler_seconds_bucket"))
            .count();
        assert_eq!(buckets, HANDLER_SECONDS_BUCKETS.len() + 1);
    }

    /// Every sample line belongs to a family announced by a TYPE line
    /// before it, and no family is announced twice.
    #[test]
    fn every_sample_has_one_type_line() {
        let text = render_prometheus_metrics(&snapshot());
        let mut families = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(families.insert(name.to_string()), "{name} twice");
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|f| families.contains(*f)))
                    .unwrap_or(name);
                assert!(families.contains(family), "{line} before its TYPE");
            }
        }
    }

    #[test]
    fn unknown_commit_is_omitted_and_labels_are_escaped() {
        let mut s = stats();
        s.committed = None;
        s.topic = "a\"b".into();
        let text = render_prometheus(&[s]);
        assert!(!text.contains("weir_pc_committed_offset{"));
        assert!(text.contains("topic=\"a\\\"b\""));
    }
}
