//! `Client::producer_topic` against a scripted broker that answers
//! Metadata the way Kafka does while it auto-creates a topic
//! (`LEADER_NOT_AVAILABLE`, then partitions without a leader) or when it
//! does not auto-create (`UNKNOWN_TOPIC_OR_PARTITION`). weir's own broker
//! creates the topic before it answers, so only a script shows the waits.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weir_client::{Client, ClientError};
use weir_protocol::codec::{Decodable, Encodable, Message};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::api_versions_response::ApiVersion;
use weir_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use weir_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    RequestHeader, ResponseHeader,
};

/// The broker's answer about the topic: its error code and one leader per
/// partition (-1: none).
#[derive(Clone)]
struct Answer {
    error: ErrorCode,
    leaders: Vec<i32>,
}

fn answer(error: ErrorCode, leaders: &[i32]) -> Answer {
    Answer {
        error,
        leaders: leaders.to_vec(),
    }
}

/// A broker on a local port answering ApiVersions and Metadata; topic
/// requests get the scripted answers in order (the last one repeats).
/// `asked` records `allow_auto_topic_creation` of each topic request.
struct Scripted {
    addr: String,
    asked: Arc<Mutex<Vec<bool>>>,
}

impl Scripted {
    async fn start(script: Vec<Answer>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (script, log) = (script.clone(), log.clone());
                tokio::spawn(serve(stream, addr.port(), script, log));
            }
        });
        Scripted {
            addr: addr.to_string(),
            asked,
        }
    }

    fn asked(&self) -> Vec<bool> {
        self.asked.lock().unwrap().clone()
    }
}

async fn serve(mut stream: TcpStream, port: u16, script: Vec<Answer>, log: Arc<Mutex<Vec<bool>>>) {
    let mut next = 0;
    loop {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut frame).await.unwrap();
        let mut frame = Bytes::from(frame);
        let api = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let header =
            RequestHeader::decode(&mut frame, api.request_header_version(version)).unwrap();
        let mut out = BytesMut::new();
        out.put_i32(0);
        ResponseHeader {
            correlation_id: header.correlation_id,
            ..Default::default()
        }
        .encode(&mut out, api.response_header_version(version))
        .unwrap();
        match api {
            ApiKey::ApiVersions => {
                ApiVersionsRequest::decode(&mut frame, version).unwrap();
                let range = |key: ApiKey, (min, max): (i16, i16)| ApiVersion {
                    api_key: key as i16,
                    min_version: min,
                    max_version: max,
                    ..Default::default()
                };
                ApiVersionsResponse {
                    api_keys: vec![
                        range(ApiKey::ApiVersions, ApiVersionsRequest::VALID_VERSIONS),
                        range(ApiKey::Metadata, MetadataRequest::VALID_VERSIONS),
                    ],
                    ..Default::default()
                }
                .encode(&mut out, version)
                .unwrap();
            }
            ApiKey::Metadata => {
                let req = MetadataRequest::decode(&mut frame, version).unwrap();
                let names: Vec<String> = req
                    .topics
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|t| t.name)
                    .collect();
                let topics = names
                    .into_iter()
                    .map(|name| {
                        log.lock().unwrap().push(req.allow_auto_topic_creation);
                        let a = &script[next.min(script.len() - 1)];
                        next += 1;
                        MetadataResponseTopic {
                            error_code: a.error.code(),
                            name: Some(name),
                            partitions: a
                                .leaders
                                .iter()
                                .enumerate()
                                .map(|(i, &leader)| MetadataResponsePartition {
                                    error_code: if leader < 0 {
                                        ErrorCode::LeaderNotAvailable.code()
                                    } else {
                                        0
                                    },
                                    partition_index: i as i32,
                                    leader_id: leader,
                                    ..Default::default()
                                })
                                .collect(),
                            ..Default::default()
                        }
                    })
                    .collect();
                MetadataResponse {
                    brokers: vec![MetadataResponseBroker {
                        node_id: 1,
                        host: "127.0.0.1".into(),
                        port: port as i32,
                        ..Default::default()
                    }],
                    controller_id: 1,
                    topics,
                    ..Default::default()
                }
                .encode(&mut out, version)
                .unwrap();
            }
            other => panic!("unexpected request {other:?}"),
        }
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        stream.write_all(&out).await.unwrap();
    }
}

const MAX_BLOCK: Duration = Duration::from_secs(10);

#[tokio::test]
async fn waits_while_kafka_creates_the_topic() {
    let broker = Scripted::start(vec![
        answer(ErrorCode::UnknownTopicOrPartition, &[]),
        answer(ErrorCode::LeaderNotAvailable, &[]),
        // Another broker that has not heard of it yet.
        answer(ErrorCode::UnknownTopicOrPartition, &[]),
        answer(ErrorCode::None, &[1, -1, 1]),
        answer(ErrorCode::None, &[1, 1, 1]),
    ])
    .await;
    let mut client = Client::connect(&broker.addr, "test").await.unwrap();
    let t = client.producer_topic("fresh", MAX_BLOCK).await.unwrap();
    assert!(t.auto_created);
    assert_eq!(t.info.partitions.len(), 3);
    assert!(t.info.partitions.iter().all(|p| p.leader == 1));
    // Plain lookup first, then every request asks for auto-creation.
    assert_eq!(broker.asked(), [false, true, true, true, true]);
}

#[tokio::test]
async fn an_existing_topic_is_not_reported_as_created() {
    let broker = Scripted::start(vec![answer(ErrorCode::None, &[1, 1])]).await;
    let mut client = Client::connect(&broker.addr, "test").await.unwrap();
    let t = client.producer_topic("old", MAX_BLOCK).await.unwrap();
    assert!(!t.auto_created);
    assert_eq!(broker.asked(), [false]);
}

#[tokio::test]
async fn a_broker_that_does_not_auto_create_is_told_at_once() {
    let broker = Scripted::start(vec![answer(ErrorCode::UnknownTopicOrPartition, &[])]).await;
    let mut client = Client::connect(&broker.addr, "test").await.unwrap();
    let e = client.producer_topic("nope", MAX_BLOCK).await.unwrap_err();
    assert!(
        matches!(&e, ClientError::AutoCreateDisabled(t) if t == "nope"),
        "{e}"
    );
    assert_eq!(broker.asked(), [false, true]);
}

#[tokio::test]
async fn a_topic_without_leaders_runs_out_of_time() {
    let broker = Scripted::start(vec![
        answer(ErrorCode::UnknownTopicOrPartition, &[]),
        answer(ErrorCode::None, &[-1, 1]),
    ])
    .await;
    let mut client = Client::connect(&broker.addr, "test").await.unwrap();
    let e = client
        .producer_topic("stuck", Duration::from_millis(350))
        .await
        .unwrap_err();
    match &e {
        ClientError::TopicNotReady {
            topic,
            waited_ms,
            reason,
        } => {
            assert_eq!((topic.as_str(), *waited_ms), ("stuck", 350));
            assert_eq!(reason, "no leader for partition 0");
        }
        other => panic!("{other}"),
    }
    // About one request per 100 ms of backoff, not a busy loop.
    let asked = broker.asked().len();
    assert!((4..=8).contains(&asked), "{asked} requests");
}

#[tokio::test]
async fn a_non_retriable_error_ends_the_wait() {
    let broker = Scripted::start(vec![
        answer(ErrorCode::UnknownTopicOrPartition, &[]),
        answer(ErrorCode::InvalidTopicException, &[]),
    ])
    .await;
    let mut client = Client::connect(&broker.addr, "test").await.unwrap();
    let e = client
        .producer_topic("bad name", MAX_BLOCK)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            ClientError::Broker {
                code: ErrorCode::InvalidTopicException,
                ..
            }
        ),
        "{e}"
    );
}
