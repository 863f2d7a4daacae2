//! Marker delivery (`transactions::markers::deliver`) against stub
//! partition leaders speaking the Kafka protocol: WriteTxnMarkers v1 per
//! leader, retriable answers and missing leaders retried, a leader without
//! the API retried until the partition moves, a fencing answer cancelling
//! the job, a deleted topic needing no marker, a stale job stopping.

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use weir_broker::transactions::markers::{
    Backoff, Delivery, MarkerProgress, MarkerRoutes, Route, deliver,
};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::frame::decode_request;
use weir_protocol::messages::api_versions_response::ApiVersion;
use weir_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use weir_txn::{MarkerJob, TopicPartition, TxnResult};

const FAST: Backoff = Backoff {
    initial: Duration::from_millis(5),
    max: Duration::from_millis(20),
};

type Script = dyn Fn(usize, &TopicPartition) -> ErrorCode + Send + Sync;

/// A partition leader that answers ApiVersions (with or without
/// WriteTxnMarkers) and WriteTxnMarkers from a script: the error for each
/// partition of the n-th request. Keeps every WriteTxnMarkers request and
/// its version.
struct StubLeader {
    addr: String,
    requests: Arc<Mutex<Vec<(i16, WriteTxnMarkersRequest)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StubLeader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StubLeader {
    async fn start(with_markers_api: bool, script: Arc<Script>) -> StubLeader {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let requests: Arc<Mutex<Vec<(i16, WriteTxnMarkersRequest)>>> = Arc::default();
        let seen = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen.clone();
                let script = script.clone();
                tokio::spawn(serve(stream, with_markers_api, script, seen));
            }
        });
        StubLeader {
            addr,
            requests,
            task,
        }
    }

    fn requests(&self) -> Vec<(i16, WriteTxnMarkersRequest)> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    with_markers_api: bool,
    script: Arc<Script>,
    seen: Arc<Mutex<Vec<(i16, WriteTxnMarkersRequest)>>>,
) {
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let (header, body) = decode_request(Bytes::from(frame)).unwrap();
        let version = header.request_api_version;
        let response = match body {
            RequestBody::ApiVersions(_) => {
                let mut api_keys = vec![ApiVersion {
                    api_key: ApiKey::ApiVersions as i16,
                    min_version: 0,
                    max_version: 3,
                    ..Default::default()
                }];
                if with_markers_api {
                    api_keys.push(ApiVersion {
                        api_key: ApiKey::WriteTxnMarkers as i16,
                        min_version: 1,
                        max_version: 1,
                        ..Default::default()
                    });
                }
                ResponseBody::ApiVersions(ApiVersionsResponse {
                    api_keys,
                    ..Default::default()
                })
            }
            RequestBody::WriteTxnMarkers(req) => {
                let n = {
                    let mut s = seen.lock().unwrap();
                    s.push((version, req.clone()));
                    s.len() - 1
                };
                let markers = req
                    .markers
                    .iter()
                    .map(|m| WritableTxnMarkerResult {
                        producer_id: m.producer_id,
                        topics: m
                            .topics
                            .iter()
                            .map(|t| WritableTxnMarkerTopicResult {
                                name: t.name.clone(),
                                partitions: t
                                    .partition_indexes
                                    .iter()
                                    .map(|p| WritableTxnMarkerPartitionResult {
                                        partition_index: *p,
                                        error_code: script(
                                            n,
                                            &TopicPartition::new(t.name.clone(), *p),
                                        )
                                        .code(),
                                        ..Default::default()
                                    })
                                    .collect(),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect();
                ResponseBody::WriteTxnMarkers(WriteTxnMarkersResponse {
                    markers,
                    ..Default::default()
                })
            }
            other => panic!("unexpected request {:?}", other.api_key()),
        };
        let mut buf = BytesMut::new();
        weir_protocol::frame::encode_response(
            &mut buf,
            header.correlation_id,
            response.api_key(),
            version,
            &response,
        )
        .unwrap();
        if stream.write_all(&buf).await.is_err() {
            return;
        }
    }
}

/// Routes from a function of the partition and how many lookups were made.
struct Routes<F: Fn(usize, &TopicPartition) -> Route + Send + Sync> {
    f: F,
    calls: AtomicUsize,
}

impl<F: Fn(usize, &TopicPartition) -> Route + Send + Sync> MarkerRoutes for Routes<F> {
    fn route(&self, tp: &TopicPartition) -> Route {
        (self.f)(self.calls.fetch_add(1, Ordering::SeqCst), tp)
    }
}

fn routes<F: Fn(usize, &TopicPartition) -> Route + Send + Sync>(f: F) -> Routes<F> {
    Routes {
        f,
        calls: AtomicUsize::new(0),
    }
}

#[derive(Default)]
struct Progress {
    written: Mutex<Vec<TopicPartition>>,
    cancelled: AtomicBool,
    unwanted_after: Option<usize>,
    asked: AtomicUsize,
}

impl MarkerProgress for Progress {
    fn wanted(&self, _: &MarkerJob) -> bool {
        let n = self.asked.fetch_add(1, Ordering::SeqCst);
        self.unwanted_after.is_none_or(|limit| n < limit)
    }
    fn written(&self, _: &MarkerJob, tp: &TopicPartition) {
        self.written.lock().unwrap().push(tp.clone());
    }
    fn cancelled(&self, _: &MarkerJob) {
        self.cancelled.store(true, Ordering::SeqCst);
    }
}

impl Progress {
    fn written(&self) -> BTreeSet<TopicPartition> {
        self.written.lock().unwrap().iter().cloned().collect()
    }
}

fn tp(t: &str, p: i32) -> TopicPartition {
    TopicPartition::new(t, p)
}

fn job(partitions: &[(&str, i32)]) -> MarkerJob {
    MarkerJob {
        transactional_id: "tx".into(),
        producer_id: 4_000,
        producer_epoch: 3,
        result: TxnResult::Commit,
        coordinator_epoch: 7,
        txn_partition: 0,
        partitions: partitions.iter().map(|(t, p)| tp(t, *p)).collect(),
        load: 0,
    }
}

fn no_shutdown() -> tokio::sync::watch::Receiver<bool> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    std::mem::forget(tx);
    rx
}

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("delivery ended within 20 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retriable_answer_is_retried_until_every_marker_is_written() {
    let stub = StubLeader::start(
        true,
        Arc::new(|n, tp: &TopicPartition| {
            if n == 0 && *tp == TopicPartition::new("t", 0) {
                ErrorCode::NotLeaderOrFollower
            } else {
                ErrorCode::None
            }
        }),
    )
    .await;
    let addr = stub.addr.clone();
    let r = routes(move |_, _| Route::Leader {
        node: 2,
        addr: addr.clone(),
    });
    let progress = Progress::default();
    let j = job(&[("t", 0), ("t", 1), ("u", 0)]);
    let d = within(deliver(&j, &r, &progress, FAST, no_shutdown())).await;
    assert_eq!(d, Delivery::Written);
    assert_eq!(progress.written(), j.partitions);
    let reqs = stub.requests();
    assert_eq!(reqs.len(), 2, "one request, then the retry");
    let (version, first) = &reqs[0];
    assert_eq!(*version, 1, "WriteTxnMarkers v1");
    let m = &first.markers[0];
    assert_eq!(
        (
            m.producer_id,
            m.producer_epoch,
            m.transaction_result,
            m.coordinator_epoch
        ),
        (4_000, 3, true, 7)
    );
    let topics: Vec<(&str, &[i32])> = m
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partition_indexes.as_slice()))
        .collect();
    assert_eq!(topics, vec![("t", &[0, 1][..]), ("u", &[0][..])]);
    let retried = &reqs[1].1.markers[0].topics;
    assert_eq!(retried.len(), 1);
    assert_eq!(
        (retried[0].name.as_str(), &retried[0].partition_indexes[..]),
        ("t", &[0][..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_grouped_by_leader() {
    let ok: Arc<Script> = Arc::new(|_, _: &TopicPartition| ErrorCode::None);
    let a = StubLeader::start(true, ok.clone()).await;
    let b = StubLeader::start(true, ok).await;
    let (addr_a, addr_b) = (a.addr.clone(), b.addr.clone());
    let r = routes(move |_, tp| {
        if tp.partition % 2 == 0 {
            Route::Leader {
                node: 1,
                addr: addr_a.clone(),
            }
        } else {
            Route::Leader {
                node: 2,
                addr: addr_b.clone(),
            }
        }
    });
    let progress = Progress::default();
    let j = job(&[("t", 0), ("t", 1), ("t", 2), ("t", 3)]);
    assert_eq!(
        within(deliver(&j, &r, &progress, FAST, no_shutdown())).await,
        Delivery::Written
    );
    for (stub, want) in [(&a, vec![0, 2]), (&b, vec![1, 3])] {
        let reqs = stub.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].1.markers[0].topics[0].partition_indexes, want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fencing_answer_cancels_the_job() {
    let stub = StubLeader::start(
        true,
        Arc::new(|_, tp: &TopicPartition| {
            if tp.partition == 1 {
                ErrorCode::InvalidProducerEpoch
            } else {
                ErrorCode::None
            }
        }),
    )
    .await;
    let addr = stub.addr.clone();
    let r = routes(move |_, _| Route::Leader {
        node: 2,
        addr: addr.clone(),
    });
    let progress = Progress::default();
    let j = job(&[("t", 0), ("t", 1)]);
    assert_eq!(
        within(deliver(&j, &r, &progress, FAST, no_shutdown())).await,
        Delivery::Cancelled
    );
    assert!(progress.cancelled.load(Ordering::SeqCst));
    assert_eq!(stub.requests().len(), 1, "not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_without_the_api_is_retried_until_the_partition_moves() {
    let ok: Arc<Script> = Arc::new(|_, _: &TopicPartition| ErrorCode::None);
    let old = StubLeader::start(false, ok.clone()).await;
    let new = StubLeader::start(true, ok).await;
    let (old_addr, new_addr) = (old.addr.clone(), new.addr.clone());
    // the leader is unknown for a while, then an old broker, then a new one
    let r = routes(move |n, _| match n {
        0..=1 => Route::Unknown,
        2..=4 => Route::Leader {
            node: 1,
            addr: old_addr.clone(),
        },
        _ => Route::Leader {
            node: 2,
            addr: new_addr.clone(),
        },
    });
    let progress = Progress::default();
    let j = job(&[("t", 0)]);
    assert_eq!(
        within(deliver(&j, &r, &progress, FAST, no_shutdown())).await,
        Delivery::Written
    );
    assert!(
        old.requests().is_empty(),
        "never sent where it is not served"
    );
    assert_eq!(new.requests().len(), 1);
    assert!(r.calls.load(Ordering::SeqCst) >= 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_needs_no_marker_and_a_stale_job_stops() {
    let progress = Progress::default();
    let j = job(&[("gone", 0)]);
    let r = routes(|_, _| Route::Gone);
    assert_eq!(
        within(deliver(&j, &r, &progress, FAST, no_shutdown())).await,
        Delivery::Written
    );
    assert_eq!(progress.written(), j.partitions);

    // a leader never known: the job runs until the coordinator drops it
    let progress = Progress {
        unwanted_after: Some(5),
        ..Progress::default()
    };
    let r = routes(|_, _| Route::Unknown);
    assert_eq!(
        within(deliver(&j, &r, &progress, FAST, no_shutdown())).await,
        Delivery::Stale
    );
    assert!(progress.written().is_empty());

    // shutdown ends it too
    let (tx, rx) = tokio::sync::watch::channel(false);
    let progress = Progress::default();
    let run = tokio::spawn(async move {
        deliver(&j, &routes(|_, _| Route::Unknown), &progress, FAST, rx).await
    });
    tx.send(true).unwrap();
    assert_eq!(within(run).await.unwrap(), Delivery::Shutdown);
}
