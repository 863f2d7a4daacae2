//! A `metrics` recorder for tests (the crate's unit tests and, through a
//! `#[path]` module, its integration tests): keeps every counter, gauge
//! and histogram by name and labels, written `name{label=value,...}` with
//! the labels sorted.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ::metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

#[derive(Default)]
struct Store {
    counters: BTreeMap<String, Arc<Cell>>,
    gauges: BTreeMap<String, Arc<Cell>>,
    histograms: BTreeMap<String, Arc<Samples>>,
}

/// A counter's value, or a gauge's as `f64` bits.
#[derive(Default)]
struct Cell(AtomicU64);

impl CounterFn for Cell {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::SeqCst);
    }

    fn absolute(&self, value: u64) {
        self.0.fetch_max(value, Ordering::SeqCst);
    }
}

impl GaugeFn for Cell {
    fn increment(&self, value: f64) {
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| {
                Some((f64::from_bits(b) + value).to_bits())
            });
    }

    fn decrement(&self, value: f64) {
        GaugeFn::increment(self, -value);
    }

    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::SeqCst);
    }
}

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// Every metric registered with it, by `name{labels}`.
#[derive(Default, Clone)]
pub struct TestRecorder {
    store: Arc<Mutex<Store>>,
}

fn id(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    if labels.is_empty() {
        return key.name().to_string();
    }
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl TestRecorder {
    /// A counter's value (`None`: never registered).
    pub fn counter(&self, id: &str) -> Option<u64> {
        let store = self.store.lock().unwrap();
        store.counters.get(id).map(|c| c.0.load(Ordering::SeqCst))
    }

    /// A gauge's value (`None`: never registered).
    pub fn gauge(&self, id: &str) -> Option<f64> {
        let store = self.store.lock().unwrap();
        store
            .gauges
            .get(id)
            .map(|c| f64::from_bits(c.0.load(Ordering::SeqCst)))
    }

    /// A histogram's observations (`None`: never registered).
    pub fn histogram(&self, id: &str) -> Option<Vec<f64>> {
        let store = self.store.lock().unwrap();
        store
            .histograms
            .get(id)
            .map(|h| h.0.lock().unwrap().clone())
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut store = self.store.lock().unwrap();
        Counter::from_arc(store.counters.entry(id(key)).or_default().clone())
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let mut store = self.store.lock().unwrap();
        Gauge::from_arc(store.gauges.entry(id(key)).or_default().clone())
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut store = self.store.lock().unwrap();
        Histogram::from_arc(store.histograms.entry(id(key)).or_default().clone())
    }
}
