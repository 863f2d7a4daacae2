//! The first idempotent produce to a partition after a restart needs the
//! partition's producer state (snapshot and log tail, read from disk): it
//! is loaded on a blocking thread before the append, never inline on an
//! async worker, and it is the right state (the next sequence is accepted,
//! a retried batch is a duplicate).

use crate::common;
use common::*;

use std::sync::atomic::Ordering;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_idempotent_produce_loads_producer_state_off_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "idem", 2, &[]).await, NONE);
    let (pid, epoch) = init_pid(&mut c).await;
    for seq in (0..50).step_by(5) {
        let r = produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, seq, 5), -1).await;
        assert_eq!(r, (NONE, seq as i64));
    }
    drop(c);
    b.shutdown().await.unwrap();

    let b = start_broker(dir.path(), &[]).await;
    let loads = b.broker.replicas.producer_loads();
    assert_eq!(loads.ahead.load(Ordering::SeqCst), 0);
    let mut c = Client::connect(b.local_addr).await;
    // A retry of the last batch: a duplicate, answered with its offset.
    let r = produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 45, 5), -1).await;
    assert_eq!(r, (NONE, 45));
    let r = produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 50, 5), -1).await;
    assert_eq!(r, (NONE, 50));
    // A sequence gap is still refused.
    let r = produce(&mut c, "idem", 0, idempotent_batch(pid, epoch, 60, 5), -1).await;
    assert_eq!(r.0, 45, "OUT_OF_ORDER_SEQUENCE_NUMBER");
    // The other partition: a first batch of the producer there.
    let r = produce(&mut c, "idem", 1, idempotent_batch(pid, epoch, 0, 5), -1).await;
    assert_eq!(r, (NONE, 0));
    assert_eq!(
        loads.ahead.load(Ordering::SeqCst),
        2,
        "one load per partition"
    );
    assert_eq!(loads.inline.load(Ordering::SeqCst), 0, "loaded on a worker");
    let text = weir_broker::metrics::render(&b.broker);
    assert!(
        text.contains("weir_producer_state_loads_ahead_total 2"),
        "{text}"
    );
    b.shutdown().await.unwrap();
}
