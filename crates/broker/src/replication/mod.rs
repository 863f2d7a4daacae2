//! Partition replication: followers fetch from leaders with Kafka's Fetch
//! API, leaders track them, move the high watermark over the ISR and ask
//! the controller to change the ISR.
//!
//! - [`state`]: one partition's replication state and Kafka's rules, pure.
//! - [`fetcher`]: this broker's follower fetches, one task per leader.
//! - [`IsrChanger`]: how ISR changes reach the controller (AlterPartition);
//!   installed by the process that runs the cluster wiring.
//!
//! The [`ReplicaManager`](crate::replica_manager::ReplicaManager) holds the
//! states; see docs/replication.md.

pub mod fetcher;
pub mod state;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use weir_protocol::error_code::ErrorCode;
use weir_storage::TopicPartition;

use crate::broker::Broker;
use state::IsrChange;

/// The committed partition after an ISR change: `(leader epoch, partition
/// epoch, ISR)`.
pub type IsrAnswer = Result<(i32, i32, Vec<i32>), ErrorCode>;

/// Sends ISR changes to the active controller.
pub trait IsrChanger: Send + Sync {
    fn alter_partition(&self, change: IsrChange)
    -> Pin<Box<dyn Future<Output = IsrAnswer> + Send>>;
}

/// Sends `change` and applies the answer.
pub fn send_isr_change(broker: &Arc<Broker>, change: IsrChange) {
    let Some(changer) = broker.isr_changer() else {
        // No controller to ask (a single node has no followers).
        let tp = TopicPartition::new(change.topic.clone(), change.partition);
        broker
            .replicas
            .isr_answered(&tp, Err(ErrorCode::NotController), broker.now_ms());
        return;
    };
    let broker = Arc::clone(broker);
    tokio::spawn(async move {
        let tp = TopicPartition::new(change.topic.clone(), change.partition);
        tracing::info!(partition = %tp, isr = ?change.new_isr, "asking the controller for an ISR change");
        let answer = changer.alter_partition(change).await;
        if let Err(code) = &answer {
            tracing::warn!(partition = %tp, ?code, "ISR change refused");
        }
        broker.replicas.isr_answered(&tp, answer, broker.now_ms());
    });
}

/// Shrinks the ISRs this broker leads every half of
/// `replica.lag.time.max.ms`, until `stop` turns true.
pub async fn isr_shrink_loop(broker: Arc<Broker>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let lag_max = broker.replica_lag_time_max_ms();
        let period = Duration::from_millis(u64::try_from(lag_max / 2).unwrap_or(1).max(1));
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stop.changed() => return,
        }
        for change in broker.replicas.isr_shrinks(broker.now_ms(), lag_max) {
            send_isr_change(&broker, change);
        }
    }
}
