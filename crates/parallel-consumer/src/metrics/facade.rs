//! The same metrics through the `metrics` crate's facade (cargo feature
//! `metrics`), to whatever recorder the application installed (for
//! example `metrics-exporter-prometheus`).
//!
//! Counters and the latency histogram are pushed as the events happen,
//! through handles registered once when the consumer starts: per event a
//! handle call, no name lookup, no label allocation. The recorder must
//! therefore be installed before the consumer starts (handles registered
//! without one do nothing). Per-partition values are state, not events:
//! [`publish_partitions`] sets them when the application asks.

use std::time::Duration;

use ::metrics::{Counter, Histogram, Unit};

use super::{
    ATTEMPTS_FAILED, DEAD_LETTER_ERRORS, HANDLER_SECONDS, HANDLER_SECONDS_HELP, PARTITION_FAMILIES,
    RECORDS_CANCELLED, RECORDS_DEAD_LETTERED, RECORDS_FAILED, RECORDS_PROCESSED, RETRIES,
    counter_help,
};
use crate::engine::PartitionStats;

/// The consumer's facade handles, registered with the recorder current
/// when the consumer started.
#[derive(Debug)]
pub(crate) struct Handles {
    pub processed: Counter,
    pub attempts_failed: Counter,
    pub retries: Counter,
    pub dead_lettered: Counter,
    pub dead_letter_errors: Counter,
    pub failed: Counter,
    pub cancelled: Counter,
    pub handler_seconds: Histogram,
}

impl Handles {
    /// Describes every metric and registers the handles with the current
    /// recorder (the thread's local one if set, else the global one).
    pub(crate) fn register() -> Handles {
        let counters = [
            RECORDS_PROCESSED,
            ATTEMPTS_FAILED,
            RETRIES,
            RECORDS_DEAD_LETTERED,
            DEAD_LETTER_ERRORS,
            RECORDS_FAILED,
            RECORDS_CANCELLED,
        ];
        for name in counters {
            ::metrics::describe_counter!(name, Unit::Count, counter_help(name));
        }
        ::metrics::describe_histogram!(HANDLER_SECONDS, Unit::Seconds, HANDLER_SECONDS_HELP);
        for f in &PARTITION_FAMILIES {
            if f.counter {
                ::metrics::describe_counter!(f.name, f.help);
            } else {
                ::metrics::describe_gauge!(f.name, f.help);
            }
        }
        Handles {
            processed: ::metrics::counter!(RECORDS_PROCESSED),
            attempts_failed: ::metrics::counter!(ATTEMPTS_FAILED),
            retries: ::metrics::counter!(RETRIES),
            dead_lettered: ::metrics::counter!(RECORDS_DEAD_LETTERED),
            dead_letter_errors: ::metrics::counter!(DEAD_LETTER_ERRORS),
            failed: ::metrics::counter!(RECORDS_FAILED),
            cancelled: ::metrics::counter!(RECORDS_CANCELLED),
            handler_seconds: ::metrics::histogram!(HANDLER_SECONDS),
        }
    }

    pub(crate) fn attempt(&self, elapsed: Duration, succeeded: bool) {
        self.handler_seconds.record(elapsed.as_secs_f64());
        if succeeded {
            self.processed.increment(1);
        } else {
            self.attempts_failed.increment(1);
        }
    }
}

/// Sets every per-partition metric of `stats` (labels `topic`,
/// `partition`) in the current recorder. Partitions in `published` (the
/// previous call's) that are no longer owned get the metrics of work held
/// by this consumer (lag, in flight, waiting, failed, age, paused,
/// stopped) set to 0; their offsets keep their last values. `published`
/// becomes this call's partitions.
pub(crate) fn publish_partitions(stats: &[PartitionStats], published: &mut Vec<(String, i32)>) {
    for s in stats {
        for f in &PARTITION_FAMILIES {
            let Some(v) = (f.value)(s) else { continue };
            let (topic, partition) = (s.topic.clone(), s.partition.to_string());
            if f.counter {
                ::metrics::counter!(f.name, "topic" => topic, "partition" => partition)
                    .absolute(u64::try_from(v).unwrap_or(0));
            } else {
                ::metrics::gauge!(f.name, "topic" => topic, "partition" => partition).set(v as f64);
            }
        }
    }
    for (topic, partition) in published.iter() {
        if stats
            .iter()
            .any(|s| s.topic == *topic && s.partition == *partition)
        {
            continue;
        }
        for f in PARTITION_FAMILIES.iter().filter(|f| f.zero_when_gone) {
            ::metrics::gauge!(f.name, "topic" => topic.clone(), "partition" => partition.to_string())
                .set(0.0);
        }
    }
    *published = stats
        .iter()
        .map(|s| (s.topic.clone(), s.partition))
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::test_recorder::TestRecorder;
    use crate::metrics::{Counters, WATERMARK_LAG};

    /// The handles are registered with the recorder current when the
    /// counters are made (the consumer's start); events after that reach
    /// it from any thread, with no recorder current there.
    #[test]
    fn handles_registered_at_start_get_every_event() {
        let rec = TestRecorder::default();
        let c = ::metrics::with_local_recorder(&rec, Counters::new);
        c.attempt(Duration::from_millis(2), false);
        c.retry();
        std::thread::scope(|s| {
            s.spawn(|| {
                c.attempt(Duration::from_millis(3), true);
                c.dead_lettered();
                c.dead_letter_error();
                c.failed();
                c.cancelled();
            });
        });
        for (name, want) in [
            (RECORDS_PROCESSED, 1),
            (ATTEMPTS_FAILED, 1),
            (RETRIES, 1),
            (RECORDS_DEAD_LETTERED, 1),
            (DEAD_LETTER_ERRORS, 1),
            (RECORDS_FAILED, 1),
            (RECORDS_CANCELLED, 1),
        ] {
            assert_eq!(rec.counter(name), Some(want), "{name}");
        }
        assert_eq!(rec.histogram(HANDLER_SECONDS), Some(vec![0.002, 0.003]));
        let m = c.snapshot(Vec::new());
        assert_eq!((m.records_processed, m.handler_seconds.count()), (1, 2));
    }

    #[test]
    fn without_a_recorder_the_counters_still_count() {
        let c = Counters::new();
        c.attempt(Duration::from_millis(1), true);
        assert_eq!(c.snapshot(Vec::new()).records_processed, 1);
    }

    #[test]
    fn publish_sets_the_gauges_and_zeroes_the_held_work_of_gone_partitions() {
        let rec = TestRecorder::default();
        let p0 = crate::metrics::tests::stats();
        let mut p1 = crate::metrics::tests::stats();
        p1.partition = 1;
        p1.stale_results = 4;
        let mut published = Vec::new();
        ::metrics::with_local_recorder(&rec, || {
            publish_partitions(&[p0.clone(), p1.clone()], &mut published)
        });
        let id = |name: &str, p: i32| format!("{name}{{partition={p},topic=t}}");
        for p in [0, 1] {
            assert_eq!(rec.gauge(&id(WATERMARK_LAG, p)), Some(3.0));
            assert_eq!(rec.gauge(&id("weir_pc_in_flight", p)), Some(1.0));
            assert_eq!(rec.gauge(&id("weir_pc_position", p)), Some(13.0));
        }
        assert_eq!(rec.counter(&id("weir_pc_stale_results_total", 1)), Some(4));
        assert_eq!(published, vec![("t".into(), 0), ("t".into(), 1)]);

        // Partition 1 goes.
        ::metrics::with_local_recorder(&rec, || {
            publish_partitions(std::slice::from_ref(&p0), &mut published)
        });
        assert_eq!(rec.gauge(&id(WATERMARK_LAG, 0)), Some(3.0));
        assert_eq!(rec.gauge(&id(WATERMARK_LAG, 1)), Some(0.0));
        assert_eq!(rec.gauge(&id("weir_pc_in_flight", 1)), Some(0.0));
        assert_eq!(rec.gauge(&id("weir_pc_paused", 1)), Some(0.0));
        assert_eq!(
            rec.gauge(&id("weir_pc_position", 1)),
            Some(13.0),
            "offsets keep their last value"
        );
        assert_eq!(rec.counter(&id("weir_pc_stale_results_total", 1)), Some(4));
        assert_eq!(published, vec![("t".into(), 0)]);
    }
}
