//! Fetch throughput over PLAINTEXT (sendfile) and over SSL (the TLS copy
//! path) from one broker in this process, and their ratio.
//!
//! ```text
//! cargo bench -p weir-broker --bench tls_fetch            # 256 MiB, 4 passes each
//! WEIR_BENCH_MIB=1024 cargo bench -p weir-broker --bench tls_fetch
//! ```
//!
//! The broker listens on `PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0` with a
//! certificate made here (ECDSA P-256, TLS 1.3, AES-128-GCM as rustls
//! negotiates by default). The topic (4 partitions of 1 KiB records in
//! 256 KiB batches, written once, read from the page cache) is read from
//! the start by a consumer-like client that sends Fetch v13 with Kafka's
//! consumer defaults (`fetch.max.bytes` 50 MiB, `max.partition.fetch.bytes`
//! 1 MiB) and walks the batch headers for the next offsets, no per-record
//! work. The client's TLS decryption runs in this process too, on the
//! same cores as the broker, as a consumer on the broker's host would.
//! Passes alternate PLAINTEXT and SSL; the median of each is reported.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use weir_protocol::codec::Uuid;
use weir_protocol::frame::{decode_response, encode_request};
use weir_protocol::messages::*;
use weir_protocol::records::{BatchIter, Compression, RecordBatchBuilder};

const PARTITIONS: i32 = 4;
const RECORD_BYTES: usize = 1024;
const BATCH_RECORDS: usize = 256;
const PASSES: usize = 4;

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

struct Client {
    stream: Box<dyn Stream>,
    correlation_id: i32,
}

impl Client {
    async fn call(&mut self, body: RequestBody, version: i16) -> ResponseBody {
        self.correlation_id += 1;
        let header = RequestHeader {
            request_api_key: body.api_key() as i16,
            request_api_version: version,
            correlation_id: self.correlation_id,
            client_id: Some("tls-bench".into()),
            ..Default::default()
        };
        let key = body.api_key();
        let mut buf = BytesMut::new();
        encode_request(&mut buf, &header, &body).expect("encode");
        self.stream.write_all(&buf).await.expect("write");
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).await.expect("read");
        let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut frame).await.expect("read");
        decode_response(Bytes::from(frame), key, version)
            .expect("decode")
            .1
    }
}

async fn plain(addr: SocketAddr) -> Client {
    let s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    Client {
        stream: Box::new(s),
        correlation_id: 0,
    }
}

async fn tls(addr: SocketAddr, ca: &[u8]) -> Client {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.to_vec().into()).expect("CA");
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let s = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, s)
        .await
        .expect("handshake");
    Client {
        stream: Box::new(s),
        correlation_id: 0,
    }
}

/// Reads every partition of `topic` from offset 0 to `end`; bytes read.
async fn read_all(c: &mut Client, id: Uuid, end: i64) -> u64 {
    let mut next = vec![0i64; PARTITIONS as usize];
    let mut bytes = 0u64;
    while next.iter().any(|o| *o < end) {
        let req = FetchRequest {
            replica_id: -1,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 50 << 20,
            session_epoch: -1,
            topics: vec![fetch_request::FetchTopic {
                topic_id: id,
                partitions: (0..PARTITIONS)
                    .filter(|p| next[*p as usize] < end)
                    .map(|p| fetch_request::FetchPartition {
                        partition: p,
                        current_leader_epoch: -1,
                        fetch_offset: next[p as usize],
                        last_fetched_epoch: -1,
                        log_start_offset: -1,
                        partition_max_bytes: 1 << 20,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let ResponseBody::Fetch(r) = c.call(RequestBody::Fetch(req), 13).await else {
            panic!("not a fetch response")
        };
        for p in &r.responses[0].partitions {
            assert_eq!(p.error_code, 0, "fetch error");
            let Some(records) = &p.records else { continue };
            bytes += records.len() as u64;
            for b in BatchIter::new(records.clone()) {
                next[p.partition_index as usize] = b.expect("batch").last_offset() + 1;
            }
        }
    }
    bytes
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mib: usize = std::env::var("WEIR_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = weir_test_support::pki::TestPki::new();
    let ks = dir.path().join("broker.pem");
    std::fs::write(&ks, pki.server("bench", 1).keystore_pem()).expect("keystore");
    let mut s = weir_broker::ConfigSources::default();
    s.set("listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0");
    s.set("ssl.keystore.location", &ks.display().to_string());
    s.set("log.dirs", &dir.path().join("data").display().to_string());
    s.set("http.listeners", "");
    let b = weir_broker::start(s.build().expect("config"))
        .await
        .expect("start");
    let plain_addr = b.listener_addr("PLAINTEXT").expect("PLAINTEXT");
    let ssl_addr = b.listener_addr("SSL").expect("SSL");

    let mut c = plain(plain_addr).await;
    let create = CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: "bench".into(),
            num_partitions: PARTITIONS,
            replication_factor: 1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    c.call(RequestBody::CreateTopics(create), 7).await;
    // produce once every partition has its leader
    let topic_meta = || MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some("bench".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let ResponseBody::Metadata(m) = c.call(RequestBody::Metadata(topic_meta()), 12).await
        else {
            panic!("metadata")
        };
        let t = &m.topics[0];
        if t.error_code == 0
            && t.partitions.len() == PARTITIONS as usize
            && t.partitions
                .iter()
                .all(|p| p.error_code == 0 && p.leader_id >= 0)
        {
            break;
        }
        assert!(Instant::now() < deadline, "topic not ready: {t:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let value = Bytes::from(vec![b'x'; RECORD_BYTES]);
    let batch_bytes = BATCH_RECORDS * RECORD_BYTES;
    let batches_per_partition = (mib << 20) / batch_bytes / PARTITIONS as usize;
    for _ in 0..batches_per_partition {
        let mut data = Vec::new();
        for p in 0..PARTITIONS {
            let mut builder = RecordBatchBuilder::new(Compression::None);
            for _ in 0..BATCH_RECORDS {
                builder
                    .push(0, None, Some(value.clone()), vec![])
                    .expect("record");
            }
            data.push(produce_request::PartitionProduceData {
                index: p,
                records: Some(builder.build().expect("batch").into_bytes()),
                ..Default::default()
            });
        }
        let req = ProduceRequest {
            acks: 1,
            timeout_ms: 10_000,
            topic_data: vec![produce_request::TopicProduceData {
                name: "bench".into(),
                partition_data: data,
                ..Default::default()
            }],
            ..Default::default()
        };
        let ResponseBody::Produce(r) = c.call(RequestBody::Produce(req), 9).await else {
            panic!("not a produce response")
        };
        for p in &r.responses[0].partition_responses {
            assert_eq!(p.error_code, 0, "produce to partition {}", p.index);
        }
    }
    let end = (batches_per_partition * BATCH_RECORDS) as i64;
    let ResponseBody::Metadata(m) = c.call(RequestBody::Metadata(topic_meta()), 12).await else {
        panic!("metadata")
    };
    let id = m.topics[0].topic_id;

    // one untimed pass warms the page cache and both paths
    read_all(&mut plain(plain_addr).await, id, end).await;
    read_all(&mut tls(ssl_addr, pki.ca_der()).await, id, end).await;
    let (mut plain_rates, mut ssl_rates) = (Vec::new(), Vec::new());
    for _ in 0..PASSES {
        for ssl in [false, true] {
            let mut client = if ssl {
                tls(ssl_addr, pki.ca_der()).await
            } else {
                plain(plain_addr).await
            };
            let started = Instant::now();
            let bytes = read_all(&mut client, id, end).await;
            let rate = bytes as f64 / (1 << 20) as f64 / started.elapsed().as_secs_f64();
            if ssl {
                &mut ssl_rates
            } else {
                &mut plain_rates
            }
            .push(rate);
        }
    }
    let (p, s) = (median(plain_rates.clone()), median(ssl_rates.clone()));
    println!("fetch of {mib} MiB, {PASSES} passes each (MiB/s):");
    println!("  PLAINTEXT (sendfile): median {p:.0}  all {plain_rates:.0?}");
    println!("  SSL (copy + AES-GCM): median {s:.0}  all {ssl_rates:.0?}");
    println!("  SSL / PLAINTEXT: {:.2}", s / p);
    if let Err(e) = b.shutdown().await {
        eprintln!("shutdown: {e}");
    }
}
