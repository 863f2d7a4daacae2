//! The `weir_transaction*` families: the transaction coordinator's
//! transactional ids, open transactions and how transactions ended, as
//! this broker coordinates them (the `__transaction_state` partitions it
//! leads).

use super::text::{Kind, TextWriter};
use crate::broker::Broker;

pub fn render(w: &mut TextWriter, b: &Broker) {
    let Some(txns) = b.transactions() else {
        return;
    };
    let g = txns.lock().gauges(b.now_ms());
    let families: [(&str, Kind, &str, i128); 6] = [
        (
            "weir_transactional_ids",
            Kind::Gauge,
            "Transactional ids this broker coordinates.",
            g.transactional_ids as i128,
        ),
        (
            "weir_transactions_open",
            Kind::Gauge,
            "Transactions open (Ongoing, PrepareCommit or PrepareAbort) on this coordinator.",
            g.open as i128,
        ),
        (
            "weir_transactions_completing",
            Kind::Gauge,
            "Transactions whose markers are being written to their partitions.",
            g.completing as i128,
        ),
        (
            "weir_transactions_committed_total",
            Kind::Counter,
            "Transactions completed by commit (every marker written) since start.",
            i128::from(g.commits),
        ),
        (
            "weir_transactions_aborted_total",
            Kind::Counter,
            "Transactions completed by abort since start, timed-out ones included.",
            i128::from(g.aborts),
        ),
        (
            "weir_transactions_timed_out_total",
            Kind::Counter,
            "Transactions the coordinator aborted because they ran past transaction.timeout.ms.",
            i128::from(g.timeouts),
        ),
    ];
    for (name, kind, help, value) in families {
        w.family(name, kind, help);
        w.sample_int(name, &[], value);
    }
    let name = "weir_transactions_oldest_open_age_seconds";
    w.family(
        name,
        Kind::Gauge,
        "How long the oldest open transaction has been running; 0 when none is open.",
    );
    w.sample(name, &[], g.oldest_open_age_ms as f64 / 1000.0);
}
