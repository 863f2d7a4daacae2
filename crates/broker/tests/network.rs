//! Network layer: framing, versions, bad input, limits, shutdown.

use crate::common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_lists_kafka4_ranges_and_answers_unknown_versions_in_v0() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    let r = match c
        .call(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
        .await
    {
        ResponseBody::ApiVersions(r) => r,
        other => panic!("{other:?}"),
    };
    let range = |k: ApiKey| {
        r.api_keys
            .iter()
            .find(|a| a.api_key == k as i16)
            .map(|a| (a.min_version, a.max_version))
    };
    assert_eq!(range(ApiKey::Produce), Some((3, 11)));
    assert_eq!(range(ApiKey::Fetch), Some((4, 17)));
    assert_eq!(range(ApiKey::ListOffsets), Some((1, 10)));
    assert_eq!(range(ApiKey::CreateTopics), Some((2, 7)));

    // ApiVersions v99: header v2 bytes by hand; answer is a v0 response
    let mut raw = Vec::new();
    raw.extend_from_slice(&18i16.to_be_bytes());
    raw.extend_from_slice(&99i16.to_be_bytes());
    raw.extend_from_slice(&777i32.to_be_bytes());
    raw.extend_from_slice(&(-1i16).to_be_bytes());
    raw.push(0);
    let mut framed = (raw.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&raw);
    c.stream.write_all(&framed).await.unwrap();
    let frame = c.read_frame().await.unwrap();
    let (h, body) = decode_response(frame, ApiKey::ApiVersions, 0).unwrap();
    assert_eq!(h.correlation_id, 777);
    match body {
        ResponseBody::ApiVersions(r) => {
            assert_eq!(r.error_code, 35);
            assert!(
                r.api_keys
                    .iter()
                    .any(|a| a.api_key == 0 && a.min_version == 3)
            );
        }
        other => panic!("{other:?}"),
    }
    // Produce v2 was removed in Kafka 4: the connection is closed
    let mut c2 = Client::connect(b.local_addr).await;
    c2.send_only(
        RequestBody::Produce(ProduceRequest {
            acks: 1,
            ..Default::default()
        }),
        2,
    )
    .await;
    assert!(c2.is_closed().await);
    api_versions_ok(b.local_addr).await;
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_never_disturbs_other_clients_or_data() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let addr = b.local_addr;
    let mut c = Client::connect(addr).await;
    assert_eq!(create_topic(&mut c, "safe", 1, &[]).await, NONE);
    assert_eq!(
        produce(&mut c, "safe", 0, batch(&["keep-me"], 1), 1).await,
        (NONE, 0)
    );
    async fn still_fine(addr: SocketAddr, c: &mut Client) {
        api_versions_ok(addr).await;
        let (err, _, got) = fetch(c, 12, "safe", Uuid::ZERO, 0, 0).await;
        assert_eq!(err, NONE);
        assert_eq!(got[0], (0, "keep-me".to_string()));
    }
    let raw = |bytes: Vec<u8>| async move {
        let mut s = Client::connect(addr).await;
        s.stream.write_all(&bytes).await.unwrap();
        s
    };
    // random bytes
    let mut seed = 0x1234_5678u64;
    let mut junk = vec![0u8; 4096];
    for x in junk.iter_mut() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        *x = seed as u8;
    }
    junk[0] = 0; // keep the declared size below the limit
    let mut s = raw(junk).await;
    let _ = s.stream.shutdown().await;
    still_fine(addr, &mut c).await;
    // truncated frame, then EOF
    let mut s = raw(vec![0, 0, 0, 100, 0, 18, 0, 3]).await;
    let _ = s.stream.shutdown().await;
    assert!(s.is_closed().await);
    still_fine(addr, &mut c).await;
    // a 2 GiB size prefix
    let mut s = raw(vec![0x7f, 0xff, 0xff, 0xff]).await;
    assert!(s.is_closed().await);
    still_fine(addr, &mut c).await;
    // a negative size prefix
    let mut s = raw(vec![0xff, 0xff, 0xff, 0xf0]).await;
    assert!(s.is_closed().await);
    // unknown api key
    let mut frame = Vec::new();
    frame.extend_from_slice(&999i16.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&1i32.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&frame);
    let mut s = raw(framed).await;
    assert!(s.is_closed().await);
    still_fine(addr, &mut c).await;
    // Metadata v0 declaring a 2^31-1 element topics array
    let mut frame = Vec::new();
    frame.extend_from_slice(&3i16.to_be_bytes());
    frame.extend_from_slice(&0i16.to_be_bytes());
    frame.extend_from_slice(&1i32.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    frame.extend_from_slice(&i32::MAX.to_be_bytes());
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&frame);
    let mut s = raw(framed).await;
    assert!(s.is_closed().await);
    still_fine(addr, &mut c).await;
    // corrupt CRC: CORRUPT_MESSAGE, nothing appended
    let mut bad = batch(&["evil"], 1).to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert_eq!(produce(&mut c, "safe", 0, Bytes::from(bad), 1).await.0, 2);
    // truncated batch inside a valid request
    let good = batch(&["half"], 1);
    assert_eq!(
        produce(&mut c, "safe", 0, good.slice(..good.len() - 3), 1)
            .await
            .0,
        2
    );
    assert_eq!(list_offset(&mut c, "safe", -1).await.1, 1);
    still_fine(addr, &mut c).await;
    // the broker still accepts and stores new data
    assert_eq!(
        produce(&mut c, "safe", 0, batch(&["after"], 2), 1).await,
        (NONE, 1)
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "pipe", 1, &[]).await, NONE);
    let mut sent = Vec::new();
    for i in 0..20 {
        let body = RequestBody::Produce(ProduceRequest {
            acks: 1,
            timeout_ms: 1000,
            topic_data: vec![produce_request::TopicProduceData {
                name: "pipe".into(),
                partition_data: vec![produce_request::PartitionProduceData {
                    index: 0,
                    records: Some(batch(&[&format!("m{i}")], i)),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        sent.push(c.send_only(body, 9).await);
    }
    for (i, corr) in sent.into_iter().enumerate() {
        let frame = c.read_frame().await.unwrap();
        let (h, body) = decode_response(frame, ApiKey::Produce, 9).unwrap();
        assert_eq!(h.correlation_id, corr);
        match body {
            ResponseBody::Produce(r) => {
                assert_eq!(r.responses[0].partition_responses[0].base_offset, i as i64)
            }
            other => panic!("{other:?}"),
        }
    }
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limits_close_excess_connections() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("max.connections.per.ip", "2")]).await;
    let mut c1 = Client::connect(b.local_addr).await;
    let mut c2 = Client::connect(b.local_addr).await;
    for c in [&mut c1, &mut c2] {
        match c
            .call(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
            .await
        {
            ResponseBody::ApiVersions(r) => assert_eq!(r.error_code, NONE),
            other => panic!("{other:?}"),
        }
    }
    let mut c3 = Client::connect(b.local_addr).await;
    assert!(
        c3.is_closed().await,
        "third connection from one IP must be refused"
    );
    drop(c1);
    // the slot is released once the broker sees the close
    let mut ok = false;
    for _ in 0..200 {
        let mut c = Client::connect(b.local_addr).await;
        c.send_only(RequestBody::ApiVersions(ApiVersionsRequest::default()), 3)
            .await;
        if c.read_frame().await.is_some() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(ok);
    drop(c2);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[("connections.max.idle.ms", "100")]).await;
    let mut idle = Client::connect(b.local_addr).await;
    assert!(idle.is_closed().await);
    // a frame that starts but never completes is closed the same way
    let mut slow = Client::connect(b.local_addr).await;
    slow.stream.write_all(&[0, 0, 1, 0, 0, 18]).await.unwrap();
    assert!(slow.is_closed().await);
    api_versions_ok(b.local_addr).await;
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_supported_version_of_every_api_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "vv", 1, &[]).await, NONE);
    produce(&mut c, "vv", 0, batch(&["seed"], 1), 1).await;
    let id = metadata(&mut c, Some(vec!["vv"]), false).await.topics[0].topic_id;
    let mut checked = 0;
    for &(key, lo, hi) in weir_broker::handler::SUPPORTED {
        for version in lo..=hi {
            let body = request_for(key, version, "vv", id, checked);
            let resp = c.call(body, version).await;
            match &resp {
                ResponseBody::Produce(r) => {
                    assert_eq!(
                        r.responses[0].partition_responses[0].error_code, NONE,
                        "{key:?} v{version}"
                    )
                }
                ResponseBody::Fetch(r) => {
                    let p = &r.responses[0].partitions[0];
                    assert_eq!(p.error_code, NONE, "{key:?} v{version}");
                    assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
                }
                ResponseBody::ListOffsets(r) => {
                    assert_eq!(
                        r.topics[0].partitions[0].error_code, NONE,
                        "{key:?} v{version}"
                    )
                }
                ResponseBody::Metadata(r) => assert_eq!(r.topics[0].error_code, NONE),
                // No authorizer on this broker.
                ResponseBody::CreateAcls(r) => assert_eq!(r.results[0].error_code, 54),
                ResponseBody::DescribeAcls(r) => assert_eq!(r.error_code, 54),
                ResponseBody::DeleteAcls(r) => assert_eq!(r.filter_results[0].error_code, 54),
                ResponseBody::CreateTopics(r) => assert_eq!(r.topics[0].error_code, NONE),
                ResponseBody::DescribeConfigs(r) => assert_eq!(r.results[0].error_code, NONE),
                // The only broker is node 1 and already the replica.
                ResponseBody::AlterPartitionReassignments(r) => {
                    assert_eq!(
                        r.responses[0].partitions[0].error_code, NONE,
                        "{key:?} v{version}"
                    )
                }
                ResponseBody::ListPartitionReassignments(r) => {
                    assert_eq!(
                        (r.error_code, r.topics.len()),
                        (NONE, 0),
                        "{key:?} v{version}"
                    )
                }
                ResponseBody::OffsetForLeaderEpoch(r) => {
                    let p = &r.topics[0].partitions[0];
                    assert_eq!((p.error_code, p.partition), (NONE, 0), "v{version}");
                }
                ResponseBody::TxnOffsetCommit(r) => {
                    let p = &r.topics[0].partitions[0];
                    assert_eq!((p.error_code, p.partition_index), (NONE, 0), "v{version}");
                }
                // no SASL on a PLAINTEXT listener
                ResponseBody::SaslHandshake(r) => assert_eq!(r.error_code, 34, "v{version}"),
                ResponseBody::SaslAuthenticate(r) => assert_eq!(r.error_code, 34, "v{version}"),
                _ => {}
            }
            checked += 1;
        }
    }
    assert!(checked > 60, "{checked}");
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_long_polls_and_restart_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "sd", 1, &[]).await, NONE);
    let addr = b.local_addr;
    let waiter = tokio::spawn(async move {
        let mut c = Client::connect(addr).await;
        fetch(&mut c, 12, "sd", Uuid::ZERO, 0, 30_000).await
    });
    wait_parked_fetches(&b, 1).await;
    // well below the fetch's 30 s max wait
    tokio::time::timeout(Duration::from_secs(20), b.shutdown())
        .await
        .expect("shutdown waited for the long poll")
        .unwrap();
    let (err, _, got) = waiter.await.unwrap();
    assert_eq!(err, NONE);
    assert!(got.is_empty());
    assert!(dir.path().join(".kafka_cleanshutdown").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_after_a_request_body_are_ignored_like_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_broker(dir.path(), &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    // librdkafka 2.12's all-topics Metadata v12: 3 zero bytes after the body
    let frame: Vec<u8> = [
        &[0x00, 0x03, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x0b, 0x00, 0x07][..],
        b"rdkafka",
        &[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
    ]
    .concat();
    let mut framed = (frame.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&frame);
    c.stream.write_all(&framed).await.unwrap();
    let resp = c
        .read_frame()
        .await
        .expect("a response, not a closed connection");
    let (h, body) = decode_response(resp, ApiKey::Metadata, 12).unwrap();
    assert_eq!(h.correlation_id, 11);
    match body {
        ResponseBody::Metadata(m) => assert_eq!(m.brokers.len(), 1),
        other => panic!("{other:?}"),
    }
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_fails_before_the_data_dir_is_touched() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut s = ConfigSources::default();
    s.set("listeners", &taken.local_addr().unwrap().to_string());
    s.set("log.dirs", &data.display().to_string());
    match start(s.build().unwrap()).await {
        Err(weir_broker::BrokerError::Bind { .. }) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("started on a port in use"),
    }
    assert!(!data.exists());
}
