//! The consumer's counters and handler latency histogram: atomics the
//! workers update once per attempt or outcome (no lock, no allocation),
//! read as a [`ConsumerMetrics`] snapshot.
//!
//! The per-attempt counters are split in cache-line-aligned shards, one
//! picked per thread, so that workers on different threads do not bounce
//! one cache line between cores on every record; a snapshot adds the
//! shards up.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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

/// The histogram bucket of an attempt that took `nanos`: Prometheus
/// buckets are "less than or equal", so the first bound at or above it
/// (`BOUNDS_NANOS.len()`: above every bound, `+Inf`).
fn bucket_of(nanos: u64) -> usize {
    BOUNDS_NANOS.partition_point(|&b| b < nanos)
}

/// Shards of the per-attempt counters (threads beyond this share them).
const SHARDS: usize = 16;

/// Hands each thread its shard, round robin.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard (`usize::MAX`: none picked yet).
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn shard_index() -> usize {
    SHARD.with(|s| {
        let mut i = s.get();
        if i == usize::MAX {
            i = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
            s.set(i);
        }
        i
    })
}

/// The per-attempt counters of the threads using one shard, on cache
/// lines of their own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    /// Non-cumulative: `buckets[i]` took more than bound `i - 1` and at
    /// most bound `i`; the last one is above every bound (`+Inf`). The
    /// histogram's count is their sum (no separate count that could
    /// disagree with them in a snapshot).
    buckets: [AtomicU64; HANDLER_SECONDS_BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
    processed: AtomicU64,
    attempts_failed: AtomicU64,
    retries: AtomicU64,
}

/// What the workers count over the consumer's life. Each counter only
/// grows; each record's outcome is counted once, each attempt once.
#[derive(Debug)]
pub(crate) struct Counters {
    /// Per-attempt counters, by thread.
    shards: Box<[Shard]>,
    /// Per-outcome counters (rare: no shards).
    dead_lettered: AtomicU64,
    dead_letter_errors: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
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
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            dead_lettered: AtomicU64::new(0),
            dead_letter_errors: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            facade: super::facade::Handles::register(),
            #[cfg(feature = "metrics")]
            published: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn shard(&self) -> &Shard {
        &self.shards[shard_index()]
    }

    /// One handler attempt took `elapsed` and succeeded or failed.
    pub(crate) fn attempt(&self, elapsed: Duration, succeeded: bool) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let shard = self.shard();
        shard.buckets[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
        shard.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        if succeeded {
            shard.processed.fetch_add(1, Ordering::Relaxed);
        } else {
            shard.attempts_failed.fetch_add(1, Ordering::Relaxed);
        }
        #[cfg(feature = "metrics")]
        self.facade.attempt(elapsed, succeeded);
    }

    /// An attempt after a failed one starts.
    /// Records of a successful batch call beyond the one its attempt
    /// counted (a batch handler's call processes all its records).
    pub(crate) fn processed_more(&self, records: u64) {
        if records == 0 {
            return;
        }
        self.shard().processed.fetch_add(records, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.facade.processed.increment(records);
    }

    pub(crate) fn retry(&self) {
        self.shard().retries.fetch_add(1, Ordering::Relaxed);
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
        let total = |f: fn(&Shard) -> &AtomicU64| self.shards.iter().map(|s| load(f(s))).sum();
        let counts = (0..=HANDLER_SECONDS_BUCKETS.len())
            .map(|i| self.shards.iter().map(|s| load(&s.buckets[i])).sum())
            .collect();
        let sum_nanos: u64 = total(|s| &s.sum_nanos);
        ConsumerMetrics {
            records_processed: total(|s| &s.processed),
            attempts_failed: total(|s| &s.attempts_failed),
            retries: total(|s| &s.retries),
            records_dead_lettered: load(&self.dead_lettered),
            dead_letter_errors: load(&self.dead_letter_errors),
            records_failed: load(&self.failed),
            records_cancelled: load(&self.cancelled),
            handler_seconds: HistogramSnapshot {
                bounds: &HANDLER_SECONDS_BUCKETS,
                counts,
                sum_seconds: sum_nanos as f64 / 1e9,
            },
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
            assert_eq!(bucket_of(nanos), bucket, "{nanos} ns");
            let c = Counters::new();
            c.attempt(Duration::from_nanos(nanos), true);
            let s = c.snapshot(Vec::new()).handler_seconds;
            let mut want = vec![0; last + 1];
            want[bucket] = 1;
            assert_eq!(s.counts, want, "{nanos} ns");
        }
    }

    #[test]
    fn the_snapshot_counts_and_sums_every_attempt() {
        let c = Counters::new();
        for ms in [1, 2, 3, 40_000] {
            c.attempt(Duration::from_millis(ms), true);
        }
        let s = c.snapshot(Vec::new()).handler_seconds;
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

    /// More threads than shards: threads sharing a shard and threads on
    /// different shards all add up.
    #[test]
    fn concurrent_updates_are_all_counted() {
        let threads = SHARDS + 4;
        let c = std::sync::Arc::new(Counters::new());
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        c.attempt(Duration::from_micros(i), i % 2 == 0);
                        if i % 2 == 1 {
                            c.retry();
                        }
                    }
                })
            })
            .collect();
        for t in handles {
            t.join().unwrap();
        }
        let m = c.snapshot(Vec::new());
        let half = threads as u64 * 500;
        assert_eq!(
            (m.records_processed, m.attempts_failed, m.retries),
            (half, half, half)
        );
        assert_eq!(m.handler_seconds.count(), 2 * half);
        let micros: u64 = (0..1000).sum();
        let want = (threads as u64 * micros) as f64 / 1e6;
        assert!((m.handler_seconds.sum_seconds - want).abs() < 1e-9);
    }
}
