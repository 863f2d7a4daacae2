//! Broker metrics, exposed at `/metrics` in the Prometheus text format
//! (version 0.0.4).
//!
//! Two kinds of metrics:
//! - **event counters** updated on the request path: per-API request
//!   counts, failures and latency histograms, error codes in responses,
//!   network bytes, connections. Each update is a relaxed atomic add on a
//!   slot created at start (the per-API slots are indexed by api key, the
//!   error slots by api key and error code), so the hot path takes no lock
//!   and allocates nothing;
//! - **state gauges** computed when scraped ([`render`]): per-partition
//!   offsets and sizes, consumer-group lag, cleaner and retention totals,
//!   the cluster as this broker's snapshot shows it.
//!
//! The process that wires a broker into a cluster adds its own families
//! (controller counters) with [`BrokerMetrics::set_extra_metrics`]:
//!
//! ```
//! use std::sync::Arc;
//! use weir_broker::metrics::BrokerMetrics;
//! use weir_broker::metrics::text::{Kind, TextWriter};
//! let m = BrokerMetrics::new(0, std::time::Duration::ZERO);
//! m.set_extra_metrics(Arc::new(|w: &mut TextWriter| {
//!     w.family("weir_controller_fenced_brokers", Kind::Gauge, "Fenced brokers.");
//!     w.sample_int("weir_controller_fenced_brokers", &[], 0);
//! }));
//! let mut w = TextWriter::new();
//! m.write_extra(&mut w);
//! assert!(w.finish().contains("weir_controller_fenced_brokers 0"));
//! ```
//!
//! Every metric is listed with its type and labels in `docs/metrics.md`.

pub mod cluster;
pub mod render;
pub mod replication;
pub mod text;
pub mod transactions;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::ResponseBody;
use weir_storage::cleaner::LogCleaner;
use weir_storage::retention::RetentionReport;

pub use render::render;

/// Writes metric families that live outside the broker (the controller's,
/// in a cluster) into a scrape. It must write whole families (`family`,
/// then its samples) with names the broker does not use, and should be
/// quick: it runs on every scrape, on a blocking thread.
pub type ExtraMetrics = Arc<dyn Fn(&mut text::TextWriter) + Send + Sync>;

/// The installed [`ExtraMetrics`], if any.
#[derive(Default)]
struct ExtraSlot(RwLock<Option<ExtraMetrics>>);

impl std::fmt::Debug for ExtraSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = self.0.read().map(|e| e.is_some()).unwrap_or(false);
        f.debug_tuple("ExtraSlot").field(&set).finish()
    }
}

/// Upper bounds (seconds) of the request latency histogram buckets, from
/// 50 µs to 10 s; a `+Inf` bucket follows.
pub const LATENCY_BUCKETS_SECONDS: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// The same bounds in nanoseconds, for integer comparison on the hot path.
const LATENCY_BUCKETS_NS: [u64; 17] = [
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// One slot per api key 0..API_SLOTS; higher keys are not counted.
const API_SLOTS: usize = 128;

/// Error-code slots per API: codes -1..=254 at index `code + 1`, then one
/// slot for any other code.
pub const ERROR_SLOTS: usize = 257;

/// The slot of error code `code` in an API's row of the error table.
fn error_slot(code: i16) -> usize {
    usize::try_from(i32::from(code) + 1)
        .ok()
        .filter(|&i| i < ERROR_SLOTS - 1)
        .unwrap_or(ERROR_SLOTS - 1)
}

/// The error code of slot `slot`; None for the last ("any other code").
pub fn error_slot_code(slot: usize) -> Option<i16> {
    if slot >= ERROR_SLOTS - 1 {
        return None;
    }
    i16::try_from(slot).ok().map(|s| s - 1)
}

/// The `error` label of slot `slot`: Kafka's name of the code, the number
/// for a code weir does not know, `OTHER` for the last slot.
pub fn error_slot_label(slot: usize) -> String {
    match error_slot_code(slot) {
        Some(code) => match ErrorCode::from_code(code) {
            Some(e) => e.name().to_string(),
            None => code.to_string(),
        },
        None => "OTHER".to_string(),
    }
}

/// A latency histogram with fixed buckets ([`LATENCY_BUCKETS_SECONDS`]).
/// Observations are three relaxed atomic adds.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Non-cumulative counts; the last slot is the `+Inf` overflow.
    buckets: [AtomicU64; LATENCY_BUCKETS_NS.len() + 1],
    sum_ns: AtomicU64,
}

/// A consistent-enough copy of a [`Histogram`] for rendering.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Cumulative counts per bucket of [`LATENCY_BUCKETS_SECONDS`], then
    /// `+Inf` (= `count`).
    pub cumulative: Vec<u64>,
    pub count: u64,
    pub sum_seconds: f64,
}

impl Histogram {
    pub fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = LATENCY_BUCKETS_NS
            .iter()
            .position(|&b| ns <= b)
            .unwrap_or(LATENCY_BUCKETS_NS.len());
        // `i <= LATENCY_BUCKETS_NS.len()`: the last bucket is +Inf
        if let Some(bucket) = self.buckets.get(i) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = Vec::with_capacity(self.buckets.len());
        let mut total = 0u64;
        for b in &self.buckets {
            total = total.saturating_add(b.load(Ordering::Relaxed));
            cumulative.push(total);
        }
        HistogramSnapshot {
            cumulative,
            count: total,
            sum_seconds: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// Counters of one Kafka API.
#[derive(Debug, Default)]
pub struct ApiStats {
    /// Requests with this api key that reached the handler or were
    /// rejected (unsupported version, undecodable).
    pub requests: AtomicU64,
    /// Requests that got no response because they were invalid or the
    /// connection failed while answering (the connection is closed).
    pub failures: AtomicU64,
    /// Time from the complete request frame to the response written.
    pub latency: Histogram,
    /// The same time in its four stages ([`RequestStages`]).
    pub stages: StageHistograms,
}

/// Where the time of one answered request went, in order (the four add up
/// to its `weir_request_duration_seconds`):
/// - `handle`: from the complete frame to the handler's return (decoding,
///   checks, and for a Produce the append to the log);
/// - `wait`: the handler's deferred part (a Produce waiting for its sync,
///   `flush.messages`, or for the in-sync replicas, acks=all); zero when
///   the answer was ready at once;
/// - `queue`: the ready answer waiting behind earlier answers of the same
///   connection (answers go out in request order);
/// - `write`: writing the answer to the socket.
#[derive(Debug, Clone, Copy)]
pub struct RequestStages {
    pub handle: Duration,
    pub wait: Duration,
    pub queue: Duration,
    pub write: Duration,
}

/// One histogram per stage of [`RequestStages`].
#[derive(Debug, Default)]
pub struct StageHistograms {
    pub handle: Histogram,
    pub wait: Histogram,
    pub queue: Histogram,
    pub write: Histogram,
}

impl StageHistograms {
    /// The stages with their `stage` label.
    pub fn named(&self) -> [(&'static str, &Histogram); 4] {
        [
            ("handle", &self.handle),
            ("wait", &self.wait),
            ("queue", &self.queue),
            ("write", &self.write),
        ]
    }
}

/// Retention totals since start.
#[derive(Debug, Default)]
pub struct RetentionStats {
    pub runs: AtomicU64,
    pub failures: AtomicU64,
    pub segments_deleted: AtomicU64,
    pub bytes_deleted: AtomicU64,
    pub files_unlinked: AtomicU64,
}

/// The request-memory budget (`queued.max.request.bytes`) as gauges,
/// updated by [`crate::connection::RequestBudget`].
#[derive(Debug, Default)]
pub struct RequestMemoryGauges {
    /// Bytes reserved by request frames being received or handled.
    pub reserved: AtomicU64,
    /// Connections waiting for room in the budget before reading on.
    pub waiting: AtomicU64,
}

/// A fetch counted in [`BrokerMetrics::parked_fetches`] while it lives.
#[derive(Debug)]
pub struct ParkedFetch<'a>(&'a AtomicI64);

impl Drop for ParkedFetch<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Every event counter of a broker. Lives in [`crate::Broker::metrics`].
#[derive(Debug)]
pub struct BrokerMetrics {
    apis: Box<[ApiStats]>,
    /// Non-zero error codes found in responses: `API_SLOTS` rows of
    /// `ERROR_SLOTS`, row = api key, column = [`error_slot`].
    response_errors: Box<[AtomicU64]>,
    /// Request frames received, size prefix included.
    pub bytes_in: AtomicU64,
    /// Response bytes written (in memory and sendfile).
    pub bytes_out: AtomicU64,
    /// Connections admitted by the Kafka listener.
    pub connections_accepted: AtomicU64,
    /// Connections closed at once by `max.connections(.per.ip)`.
    pub connections_rejected: AtomicU64,
    /// SASL authentications that succeeded.
    pub sasl_authentications: AtomicU64,
    /// SASL authentications refused (wrong credentials, malformed or
    /// out-of-order SASL messages).
    pub sasl_authentication_failures: AtomicU64,
    /// Re-authentications (KIP-368) that succeeded.
    pub sasl_reauthentications: AtomicU64,
    /// Connections closed because their SASL session expired without a
    /// re-authentication.
    pub sasl_sessions_expired: AtomicU64,
    open_connections: AtomicI64,
    /// Fetch requests waiting for data now (long polls).
    parked_fetches: AtomicI64,
    /// Parked fetches woken by an append to one of their partitions (each
    /// wake-up is one more read of the request's partitions).
    pub fetch_wakeups: AtomicU64,
    /// Memory of request frames (`queued.max.request.bytes`).
    pub request_memory: Arc<RequestMemoryGauges>,
    /// How long the async runtime takes to start a task
    /// ([`crate::runtime_watchdog`]).
    pub runtime: Arc<crate::runtime_watchdog::RuntimeDelays>,
    pub http_requests: AtomicU64,
    /// HTTP requests whose basic-auth credentials were refused (wrong
    /// user or password, or not decodable; requests without credentials
    /// are not counted).
    pub http_auth_failures: AtomicU64,
    pub retention: RetentionStats,
    /// Server-side target assignments of consumer-protocol (KIP-848)
    /// groups: how long each computation took.
    pub consumer_group_assignment: Histogram,
    /// Set once the log cleaner runs (absent when disabled).
    cleaner: OnceLock<Arc<LogCleaner>>,
    /// Families written by the wiring layer after the broker's own.
    extra: ExtraSlot,
    /// How long opening the logs (recovery included) took at start.
    recovery: Duration,
    start_time_unix_ms: i64,
    started: Instant,
}

impl BrokerMetrics {
    pub fn new(start_time_unix_ms: i64, recovery: Duration) -> BrokerMetrics {
        BrokerMetrics {
            apis: (0..API_SLOTS).map(|_| ApiStats::default()).collect(),
            response_errors: (0..API_SLOTS * ERROR_SLOTS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            connections_accepted: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            sasl_authentications: AtomicU64::new(0),
            sasl_authentication_failures: AtomicU64::new(0),
            sasl_reauthentications: AtomicU64::new(0),
            sasl_sessions_expired: AtomicU64::new(0),
            open_connections: AtomicI64::new(0),
            parked_fetches: AtomicI64::new(0),
            fetch_wakeups: AtomicU64::new(0),
            request_memory: Arc::default(),
            runtime: Arc::default(),
            http_requests: AtomicU64::new(0),
            http_auth_failures: AtomicU64::new(0),
            retention: RetentionStats::default(),
            consumer_group_assignment: Histogram::default(),
            cleaner: OnceLock::new(),
            extra: ExtraSlot::default(),
            recovery,
            start_time_unix_ms,
            started: Instant::now(),
        }
    }

    /// The counters of api key `key`; None for keys outside the table.
    pub fn api(&self, key: i16) -> Option<&ApiStats> {
        usize::try_from(key).ok().and_then(|k| self.apis.get(k))
    }

    /// Records one request of api key `key` that took `elapsed`.
    pub fn record_request(&self, key: i16, elapsed: Duration, ok: bool) {
        if let Some(a) = self.api(key) {
            a.requests.fetch_add(1, Ordering::Relaxed);
            if !ok {
                a.failures.fetch_add(1, Ordering::Relaxed);
            }
            a.latency.observe(elapsed);
        }
    }

    /// Records the stages of an answered request of api key `key`.
    pub fn record_stages(&self, key: i16, stages: RequestStages) {
        if let Some(a) = self.api(key) {
            a.stages.handle.observe(stages.handle);
            a.stages.wait.observe(stages.wait);
            a.stages.queue.observe(stages.queue);
            a.stages.write.observe(stages.write);
        }
    }

    /// The error-code counters of api key `key` (indexed by
    /// [`error_slot`]); None for keys outside the table.
    pub fn response_errors(&self, key: i16) -> Option<&[AtomicU64]> {
        let k = usize::try_from(key).ok().filter(|&k| k < API_SLOTS)?;
        self.response_errors
            .get(k * ERROR_SLOTS..(k + 1) * ERROR_SLOTS)
    }

    /// Counts every non-zero `ErrorCode` in `body`, a response of api key
    /// `key`: one walk of the response, one relaxed atomic add per error.
    /// `NONE` is not counted (that would be an atomic add per partition
    /// of every Produce and Fetch response).
    pub fn record_response_errors(&self, key: i16, body: &ResponseBody) {
        let Some(row) = self.response_errors(key) else {
            return;
        };
        body.for_each_error_code(&mut |code| {
            // `error_slot` folds every code into the row
            if code != 0
                && let Some(counter) = row.get(error_slot(code))
            {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    pub fn connection_opened(&self) {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        self.open_connections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        self.open_connections.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn open_connections(&self) -> i64 {
        self.open_connections.load(Ordering::Relaxed).max(0)
    }

    /// Counts a fetch as waiting for data until the guard is dropped.
    pub fn fetch_parked(&self) -> ParkedFetch<'_> {
        self.parked_fetches.fetch_add(1, Ordering::SeqCst);
        ParkedFetch(&self.parked_fetches)
    }

    /// Fetch requests waiting for data now.
    pub fn parked_fetches(&self) -> i64 {
        self.parked_fetches.load(Ordering::SeqCst).max(0)
    }

    /// Adds one retention run's report.
    pub fn record_retention(&self, r: &RetentionReport) {
        let s = &self.retention;
        s.runs.fetch_add(1, Ordering::Relaxed);
        s.segments_deleted
            .fetch_add(r.segments_deleted as u64, Ordering::Relaxed);
        s.bytes_deleted
            .fetch_add(r.bytes_deleted, Ordering::Relaxed);
        s.files_unlinked
            .fetch_add(r.files_unlinked as u64, Ordering::Relaxed);
    }

    /// Adds `.deleted` files unlinked outside a retention run.
    pub fn record_unlinked(&self, n: usize) {
        self.retention
            .files_unlinked
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Registers the log cleaner whose totals `/metrics` reports (once).
    pub fn set_cleaner(&self, cleaner: Arc<LogCleaner>) {
        let _ = self.cleaner.set(cleaner);
    }

    pub fn cleaner(&self) -> Option<&Arc<LogCleaner>> {
        self.cleaner.get()
    }

    /// Installs families to append to every scrape, replacing any
    /// installed before.
    pub fn set_extra_metrics(&self, extra: ExtraMetrics) {
        *self.extra.0.write().unwrap_or_else(|p| p.into_inner()) = Some(extra);
    }

    /// Writes the installed extra families, if any.
    pub fn write_extra(&self, w: &mut text::TextWriter) {
        let extra = self
            .extra
            .0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(extra) = extra {
            extra(w);
        }
    }

    pub fn recovery(&self) -> Duration {
        self.recovery
    }

    pub fn start_time_unix_ms(&self) -> i64 {
        self.start_time_unix_ms
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_agree_in_both_units() {
        for (s, ns) in LATENCY_BUCKETS_SECONDS.iter().zip(LATENCY_BUCKETS_NS) {
            assert_eq!((s * 1e9).round() as u64, ns);
        }
        assert!(LATENCY_BUCKETS_NS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn histogram_buckets_are_upper_inclusive_and_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50)); // le 0.00005
        h.observe(Duration::from_micros(51)); // le 0.0001
        h.observe(Duration::from_millis(3)); // le 0.005
        h.observe(Duration::from_secs(11)); // +Inf only
        let s = h.snapshot();
        assert_eq!(s.count, 4);
        assert_eq!(s.cumulative.len(), LATENCY_BUCKETS_SECONDS.len() + 1);
        assert_eq!(s.cumulative[0], 1);
        assert_eq!(s.cumulative[1], 2);
        assert_eq!(s.cumulative[5], 2); // le 0.0025
        assert_eq!(s.cumulative[6], 3); // le 0.005
        assert_eq!(s.cumulative[16], 3); // le 10
        assert_eq!(s.cumulative[17], 4);
        let expect = 0.000_05 + 0.000_051 + 0.003 + 11.0;
        assert!((s.sum_seconds - expect).abs() < 1e-9, "{}", s.sum_seconds);
    }

    #[test]
    fn requests_are_counted_per_api_key_and_unknown_keys_ignored() {
        let m = BrokerMetrics::new(0, Duration::ZERO);
        m.record_request(0, Duration::from_millis(1), true);
        m.record_request(0, Duration::from_millis(1), false);
        m.record_request(1, Duration::from_millis(1), true);
        m.record_request(-1, Duration::from_millis(1), true);
        m.record_request(i16::MAX, Duration::from_millis(1), true);
        let p = m.api(0).unwrap();
        assert_eq!(p.requests.load(Ordering::Relaxed), 2);
        assert_eq!(p.failures.load(Ordering::Relaxed), 1);
        assert_eq!(p.latency.snapshot().count, 2);
        assert_eq!(m.api(1).unwrap().requests.load(Ordering::Relaxed), 1);
        assert!(m.api(-1).is_none());
        assert!(m.api(i16::MAX).is_none());
    }

    #[test]
    fn error_slots_cover_known_codes_and_fold_the_rest() {
        assert_eq!(error_slot(-1), 0);
        assert_eq!(error_slot(0), 1);
        assert_eq!(error_slot(254), ERROR_SLOTS - 2);
        assert_eq!(error_slot(255), ERROR_SLOTS - 1);
        assert_eq!(error_slot(-2), ERROR_SLOTS - 1);
        assert_eq!(error_slot(i16::MIN), ERROR_SLOTS - 1);
        assert_eq!(error_slot(i16::MAX), ERROR_SLOTS - 1);
        for code in -1..=254 {
            assert_eq!(error_slot_code(error_slot(code)), Some(code));
        }
        assert_eq!(error_slot_code(ERROR_SLOTS - 1), None);
        assert_eq!(error_slot_label(error_slot(-1)), "UNKNOWN_SERVER_ERROR");
        assert_eq!(
            error_slot_label(error_slot(3)),
            "UNKNOWN_TOPIC_OR_PARTITION"
        );
        assert_eq!(error_slot_label(error_slot(200)), "200");
        assert_eq!(error_slot_label(error_slot(-7)), "OTHER");
        let highest = ErrorCode::ALL.iter().map(|c| c.code()).max().unwrap();
        assert!(error_slot(highest) < ERROR_SLOTS - 1);
    }

    #[test]
    fn response_errors_count_every_non_zero_code_per_api() {
        use weir_protocol::messages::ProduceResponse;
        use weir_protocol::messages::produce_response::{
            PartitionProduceResponse, TopicProduceResponse,
        };
        let part = |code: i16| PartitionProduceResponse {
            error_code: code,
            ..Default::default()
        };
        let body = ResponseBody::Produce(ProduceResponse {
            responses: vec![
                TopicProduceResponse {
                    partition_responses: vec![part(3), part(0), part(3)],
                    ..Default::default()
                },
                TopicProduceResponse {
                    partition_responses: vec![part(3), part(-1), part(1000)],
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        let m = BrokerMetrics::new(0, Duration::ZERO);
        m.record_response_errors(0, &body);
        m.record_response_errors(-5, &body); // ignored
        let row = m.response_errors(0).unwrap();
        let get = |code: i16| row[error_slot(code)].load(Ordering::Relaxed);
        assert_eq!(get(3), 3);
        assert_eq!(get(-1), 1);
        assert_eq!(row[ERROR_SLOTS - 1].load(Ordering::Relaxed), 1);
        assert_eq!(get(0), 0);
        let total: u64 = row.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 5);
        let fetch: u64 = m
            .response_errors(1)
            .unwrap()
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .sum();
        assert_eq!(fetch, 0);
        assert!(m.response_errors(API_SLOTS as i16).is_none());
    }

    #[test]
    fn open_connections_follow_open_and_close() {
        let m = BrokerMetrics::new(0, Duration::ZERO);
        m.connection_opened();
        m.connection_opened();
        m.connection_closed();
        assert_eq!(m.open_connections(), 1);
        assert_eq!(m.connections_accepted.load(Ordering::Relaxed), 2);
    }
}
