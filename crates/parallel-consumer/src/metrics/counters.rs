//! The consumer's counters and handler latency histogram: atomics the
//! workers update once per attempt or outcome (no lock, no allocation),
//! read as a [`ConsumerMetrics`] snapshot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{ConsumerMetrics, HANDLER_SECONDS_BUCKETS, HistogramSnapshot};

/// [`HANDLER_SECONDS_BUCKETS`] in nanoseconds, for a comparison without
/// floating point per attempt.
const BOUNDS_NANOS: [u64; HANDLER_SECONDS_BUCKETS.len()] = {
    let mut out = [0u64; HANDLER_SECONDS_BUCKETS.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = (HANDLER_SECONDS_BUCKETS[i] * 1e9) as u64;
        i += 1;
    }
    out
};

/// Handler attempt durations by bucket. Always: the count of attempts is
/// the sum of the buckets (there is no separate count that could
/// disagree with them in a snapshot).
#[derive(Debug, Default)]
pub(crate) struct LatencyHistogram {
    /// Non-cumulative: `buckets[i]` took more than bound `i - 1` and at
    /// most bound `i`; the last one is above every bound (`+Inf`).
    buckets: [AtomicU64; HANDLER_SECONDS_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl LatencyHistogram {
    pub(crate) fn record(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        // Prometheus buckets are "less than or equal": the first bound at
        // or above the value.
        let i = BOUNDS_NANOS.partition_point(|&b| b < nanos);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: &HANDLER_SECONDS_BUCKETS,
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// What the workers count over the consumer's life. Each counter only
/// grows; each record's outcome is counted once, each attempt once.
#[derive(Debug)]
pub(crate) struct Counters {
    processed: AtomicU64,
    attempts_failed: AtomicU64,
    retries: AtomicU64,
    dead_lettered: AtomicU64,
    dead_letter_errors: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    latency: LatencyHistogram,
    /// The same events pushed to the `metrics` facade, through handles
    /// registered once.
    #[cfg(feature = "metrics")]
    facade: super::facade::Handles,
    /// The partitions whose gauges the last publish set.
    #[cfg(feature = "metrics")]
    pub(crate) published: std::sync::Mutex<Vec<(String, i32)>>,
}

impl Counters {
    /// New counters; with the `metrics` feature, their facade handles are
    /// registered with the recorder installed now.
    pub(crate) fn new() -> Counters {
        Counters {
            processed: AtomicU64::new(0),
            attempts_failed: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            dead_lettered: AtomicU64::new(0),
            dead_letter_errors: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            latency: LatencyHistogram::default(),
            #[cfg(feature = "metrics")]
            facade: super::facade::Handles::register(),
            #[cfg(feature = "metrics")]
            published: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// One handler attempt took `elapsed` and succeeded or failed.
    pub(crate) fn attempt(&self, elapsed: Duration, succeeded: bool) {
        self.latency.record(elapsed);
        if succeeded {
            self.processed.fetch_add(1, Ordering::Relaxed);
        } else {
            self.attempts_failed.fetch_add(1, Ordering::Relaxed);
        }
        #[cfg(feature = "metrics")]
        self.facade.attempt(elapsed, succeeded);
    }

    /// An attempt after a failed one starts.
    pub(crate) fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.retries.increment(1);
    }

    /// A record that failed for good was resolved by its dead-letter copy.
    pub(crate) fn dead_lettered(&self) {
        self.dead_lettered.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.dead_lettered.increment(1);
    }

    /// A dead-letter copy could not be written (the record then also
    /// counts as [`Counters::failed`]).
    pub(crate) fn dead_letter_error(&self) {
        self.dead_letter_errors.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.dead_letter_errors.increment(1);
    }

    /// A record failed for good and stopped its partition.
    pub(crate) fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.failed.increment(1);
    }

    /// A record's work ended unresolved because its partition was going
    /// (it runs again on the partition's next owner).
    pub(crate) fn cancelled(&self) {
        self.cancelled.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.cancelled.increment(1);
    }

    /// The counters now, with `partitions` as the per-partition part.
    pub(crate) fn snapshot(
        &self,
        partitions: Vec<crate::engine::PartitionStats>,
    ) -> ConsumerMetrics {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ConsumerMetrics {
            records_processed: load(&self.processed),
            attempts_failed: load(&self.attempts_failed),
            retries: load(&self.retries),
            records_dead_lettered: load(&self.dead_lettered),
            dead_letter_errors: load(&self.dead_letter_errors),
            records_failed: load(&self.failed),
            records_cancelled: load(&self.cancelled),
            handler_seconds: self.latency.snapshot(),
            partitions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_in_nanoseconds_match_the_seconds() {
        assert_eq!(BOUNDS_NANOS[0], 500_000);
        assert_eq!(BOUNDS_NANOS[BOUNDS_NANOS.len() - 1], 30_000_000_000);
        assert!(BOUNDS_NANOS.windows(2).all(|w| w[0] < w[1]));
    }

    /// Table of durations and the bucket each lands in: a value equal to a
    /// bound is in that bound's bucket ("le"), one nanosecond more is in
    /// the next, above the last bound is `+Inf`.
    #[test]
    fn each_duration_lands_in_the_first_bucket_at_or_above_it() {
        let last = HANDLER_SECONDS_BUCKETS.len();
        for (nanos, bucket) in [
            (0, 0),
            (1, 0),
            (500_000, 0),
            (500_001, 1),
            (1_000_000, 1),
            (7_000_000, 4),
            (1_000_000_000, 10),
            (1_000_000_001, 11),
            (30_000_000_000, last - 1),
            (30_000_000_001, last),
            (u64::MAX, last),
        ] {
            let h = LatencyHistogram::default();
            h.record(Duration::from_nanos(nanos));
            let s = h.snapshot();
            let mut want = vec![0; last + 1];
            want[bucket] = 1;
            assert_eq!(s.counts, want, "{nanos} ns");
        }
    }

    #[test]
    fn the_snapshot_counts_and_sums_every_attempt() {
        let h = LatencyHistogram::default();
        for ms in [1, 2, 3, 40_000] {
            h.record(Duration::from_millis(ms));
        }
        let s = h.snapshot();
        assert_eq!(s.count(), 4);
        assert!((s.sum_seconds - 40.006).abs() < 1e-9, "{}", s.sum_seconds);
        let cumulative: Vec<u64> = s.cumulative().map(|(_, n)| n).collect();
        assert_eq!(cumulative.len(), HANDLER_SECONDS_BUCKETS.len() + 1);
        assert_eq!(cumulative[1], 1, "1 ms: le 0.001");
        assert_eq!(cumulative[2], 2, "2 ms: le 0.0025");
        assert_eq!(cumulative[3], 3, "3 ms: le 0.005");
        assert_eq!(cumulative[cumulative.len() - 2], 3, "40 s is above 30 s");
        assert_eq!(*cumulative.last().unwrap(), 4);
        assert_eq!(s.cumulative().last().map(|(b, _)| b), Some(f64::INFINITY));
    }

    #[test]
    fn each_event_moves_its_own_counter() {
        let c = Counters::new();
        c.attempt(Duration::from_millis(1), false);
        c.retry();
        c.attempt(Duration::from_millis(1), true);
        c.attempt(Duration::from_millis(1), false);
        c.retry();
        c.attempt(Duration::from_millis(1), false);
        c.dead_lettered();
        c.dead_letter_error();
        c.failed();
        c.cancelled();
        let m = c.snapshot(Vec::new());
        assert_eq!(
            (
                m.records_processed,
                m.attempts_failed,
                m.retries,
                m.records_dead_lettered,
                m.dead_letter_errors,
                m.records_failed,
                m.records_cancelled,
            ),
            (1, 3, 2, 1, 1, 1, 1)
        );
        assert_eq!(
            m.handler_seconds.count(),
            m.records_processed + m.attempts_failed,
            "one observation per attempt"
        );
    }

    #[test]
    fn concurrent_updates_are_all_counted() {
        let c = std::sync::Arc::new(Counters::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        c.attempt(Duration::from_micros(i), i % 2 == 0);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let m = c.snapshot(Vec::new());
        assert_eq!((m.records_processed, m.attempts_failed), (2000, 2000));
        assert_eq!(m.handler_seconds.count(), 4000);
    }
}
