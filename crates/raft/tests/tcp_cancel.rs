//! A request whose future is dropped mid-way (openraft drops it at its own
//! timeouts) must not leave its answer to be read as the next request's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use openraft::{BasicNode, LogId, Vote};
use tokio::net::TcpListener;
use weir_raft::network::{
    MAX_FRAME_BYTES, RpcEnvelope, RpcResponse, TcpNetworkFactory, read_frame, write_frame,
};

fn append(prev_index: u64) -> AppendEntriesRequest<weir_raft::TypeConfig> {
    AppendEntriesRequest {
        vote: Vote::new_committed(1, 1),
        prev_log_id: Some(LogId::new(
            openraft::CommittedLeaderId::new(1, 1),
            prev_index,
        )),
        entries: vec![],
        leader_commit: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_request_never_answers_the_next_one() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    // A peer that answers requests in order: the very first after a
    // pause, with success; every later one with a conflict.
    let first = Arc::new(AtomicBool::new(true));
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let first = Arc::clone(&first);
            tokio::spawn(async move {
                while let Ok(frame) = read_frame(&mut stream, MAX_FRAME_BYTES).await {
                    let _: RpcEnvelope = serde_json::from_slice(&frame).unwrap();
                    let resp = if first.swap(false, Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        AppendEntriesResponse::Success
                    } else {
                        AppendEntriesResponse::Conflict
                    };
                    let bytes = serde_json::to_vec(&RpcResponse::AppendEntries(Ok(resp))).unwrap();
                    if write_frame(&mut stream, &bytes, MAX_FRAME_BYTES)
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    let mut factory = TcpNetworkFactory::new(MAX_FRAME_BYTES, None);
    let mut client = factory.new_client(2, &BasicNode::new(&addr)).await;
    let option = || RPCOption::new(Duration::from_secs(5));
    // Dropped while the peer is still working on it.
    let dropped = tokio::time::timeout(
        Duration::from_millis(50),
        client.append_entries(append(5), option()),
    )
    .await;
    assert!(dropped.is_err(), "the first request was answered too early");
    // Once the late answer has certainly arrived, a new request gets its
    // own answer (a conflict), not the dropped one's (success).
    tokio::time::sleep(Duration::from_millis(400)).await;
    let next = client.append_entries(append(9), option()).await.unwrap();
    assert_eq!(next, AppendEntriesResponse::Conflict);
}
