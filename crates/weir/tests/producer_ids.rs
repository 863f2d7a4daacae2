//! Producer ids in a cluster come from blocks the active controller hands
//! out (AllocateProducerIds), so no two brokers give out the same id.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use weir_client::Connection;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::InitProducerIdRequest;

use crate::dev_cluster::{DevCluster, FAST_SESSIONS};

/// A new idempotent producer's id from the broker at `addr`, retrying
/// while the broker has no block yet (it registers first).
async fn init_producer_id(addr: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let last = match Connection::connect(addr, "producer-ids-test").await {
            Ok(mut conn) => match conn
                .send(&InitProducerIdRequest {
                    transactional_id: None,
                    transaction_timeout_ms: 60_000,
                    producer_id: -1,
                    producer_epoch: -1,
                    ..Default::default()
                })
                .await
            {
                Ok(r) if r.error_code == ErrorCode::None.code() => return r.producer_id,
                Ok(r) => format!("{:?}", ErrorCode::from_code(r.error_code)),
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
        };
        assert!(
            Instant::now() < deadline,
            "InitProducerId at {addr}: {last}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn every_broker_of_a_cluster_hands_out_different_producer_ids() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(3, &dir.path().join("cluster"), FAST_SESSIONS);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut ids = BTreeSet::new();
    let mut blocks_per_broker = Vec::new();
    let mut asked = 0;
    for addr in cluster.bootstrap.split(',') {
        let mut blocks = BTreeSet::new();
        for _ in 0..3 {
            let id = rt.block_on(init_producer_id(addr));
            // A new cluster's controller hands out blocks of 1000 from 0;
            // a broker counting on its own starts at its clock in ms × 1000.
            assert!(
                (0..1_000_000).contains(&id),
                "{id} is not from a controller block"
            );
            blocks.insert(id / 1000);
            ids.insert(id);
            asked += 1;
        }
        blocks_per_broker.push(blocks);
    }
    assert_eq!(ids.len(), asked, "producer ids handed out twice: {ids:?}");
    for (i, a) in blocks_per_broker.iter().enumerate() {
        for b in &blocks_per_broker[i + 1..] {
            assert!(
                a.is_disjoint(b),
                "two brokers share a block: {blocks_per_broker:?}"
            );
        }
    }
}
