//! Start-up and topic creation under faults: a creation that fails part way
//! answers KAFKA_STORAGE_ERROR and leaves no partial topic, also across a
//! crash at the fault; a corrupt `weir-topics.json` and malformed offset
//! checkpoints do not refuse the start; a log dir that cannot be written at
//! start is offline (DescribeLogDirs KAFKA_STORAGE_ERROR, a metric), not a
//! reason to exit; a full disk at start still serves reads.
//!
//! The tmpfs tests mount a small tmpfs (root only: without root they are
//! skipped, or fail under CI) and unmount it even when they fail.

use crate::common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use weir_broker::broker::{Broker, CreateTopicError, system_clock};
use weir_broker::topics::{CORRUPT_TOPICS_FILE, TOPICS_FILE};
use weir_storage::backend::{CrashMode, FaultyStorage, MemStorage};

const KAFKA_STORAGE_ERROR: i16 = 56;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// DescribeConfigs `config_source` of a default value.
const DEFAULT_CONFIG: i8 = 5;

/// A tmpfs mounted on a fresh temporary dir; unmounted on drop.
struct Tmpfs {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl Tmpfs {
    /// None (with a note) when not root: mounting needs it.
    fn mount(options: &str) -> Option<Tmpfs> {
        let uid = Command::new("id").arg("-u").output().ok()?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            weir_test_support::skip_or_fail("root, to mount a tmpfs");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(st.success(), "mount -t tmpfs -o {options} failed");
        Some(Tmpfs { _dir: dir, mnt })
    }

    fn remount(&self, options: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.mnt)
            .status()
            .unwrap();
        assert!(st.success(), "remount,{options} failed");
    }

    fn inodes_used(&self) -> u64 {
        let out = Command::new("df")
            .args(["--output=iused"])
            .arg(&self.mnt)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().nth(1).unwrap().trim().parse().unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

/// Names in `dir` that belong to `topic` (partition dirs, creation intents).
fn on_disk(dir: &Path, topic: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(&format!("{topic}-")) || n.starts_with(&format!("{topic}.")))
        .collect();
    v.sort();
    v
}

fn partition_count(m: &MetadataResponse, topic: &str) -> Result<usize, i16> {
    let t = m
        .topics
        .iter()
        .find(|t| t.name.as_deref() == Some(topic))
        .expect("topic in the answer");
    if t.error_code != NONE {
        return Err(t.error_code);
    }
    Ok(t.partitions.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_failing_part_way_answers_storage_error_and_keeps_nothing() {
    let Some(fs) = Tmpfs::mount("size=64m,nr_inodes=100000") else {
        return;
    };
    let b = start_broker(&fs.mnt, &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "first", 1, &[]).await, NONE);
    // Room for about 8 of the 50 partitions (5 inodes each).
    fs.remount(&format!("nr_inodes={}", fs.inodes_used() + 40));
    assert_eq!(
        create_topic(&mut c, "orders", 50, &[]).await,
        KAFKA_STORAGE_ERROR
    );
    let m = metadata(&mut c, Some(vec!["orders"]), false).await;
    assert_eq!(
        partition_count(&m, "orders"),
        Err(UNKNOWN_TOPIC_OR_PARTITION)
    );
    assert_eq!(on_disk(&fs.mnt, "orders"), Vec::<String>::new());
    b.shutdown().await.unwrap();

    fs.remount("nr_inodes=100000");
    let b = start_broker(&fs.mnt, &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    let m = metadata(&mut c, Some(vec!["orders", "first"]), false).await;
    assert_eq!(
        partition_count(&m, "orders"),
        Err(UNKNOWN_TOPIC_OR_PARTITION),
        "a partial topic came back after the restart"
    );
    assert_eq!(partition_count(&m, "first"), Ok(1));
    // A retried creation succeeds, completely.
    assert_eq!(create_topic(&mut c, "orders", 50, &[]).await, NONE);
    // Adding partitions is all or nothing too.
    fs.remount(&format!("nr_inodes={}", fs.inodes_used() + 40));
    let grow = RequestBody::CreatePartitions(CreatePartitionsRequest {
        topics: vec![create_partitions_request::CreatePartitionsTopic {
            name: "orders".into(),
            count: 80,
            assignments: None,
            ..Default::default()
        }],
        timeout_ms: 5000,
        validate_only: false,
        ..Default::default()
    });
    match c.call(grow, 3).await {
        ResponseBody::CreatePartitions(r) => {
            assert_eq!(r.results[0].error_code, KAFKA_STORAGE_ERROR)
        }
        other => panic!("{other:?}"),
    }
    let m = metadata(&mut c, Some(vec!["orders"]), false).await;
    assert_eq!(partition_count(&m, "orders"), Ok(50));
    fs.remount("nr_inodes=100000");
    b.shutdown().await.unwrap();
    let b = start_broker(&fs.mnt, &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    let m = metadata(&mut c, Some(vec!["orders"]), false).await;
    assert_eq!(partition_count(&m, "orders"), Ok(50));
    assert_eq!(on_disk(&fs.mnt, "orders").len(), 50, "no intent left");
    b.shutdown().await.unwrap();
}

fn broker_config(dir: &Path) -> weir_broker::BrokerConfig {
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.display().to_string());
    // small preallocated indexes: the logs live in memory
    s.set("log.index.size.max.bytes", "4096");
    s.build().unwrap()
}

#[test]
fn a_creation_cut_short_by_a_crash_is_gone_after_the_restart() {
    // The table lives on the real file system, the logs in memory; the
    // process "dies" at the Nth file creation (nothing after it is written).
    for n in [3u64, 17, 30, 151] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = broker_config(dir.path());
        let m = MemStorage::new();
        let f = FaultyStorage::new(m.clone());
        let b =
            Broker::open_with_storage(cfg.clone(), system_clock(), Arc::new(f.clone())).unwrap();
        f.set_halt_on_fault(true);
        f.fail_creates_after(n);
        let e = b
            .create_topic("orders", 50, 1, BTreeMap::new(), false)
            .unwrap_err();
        assert!(matches!(e, CreateTopicError::Storage(_)), "n={n}: {e:?}");
        assert!(f.is_halted());
        drop(b);

        let crashed = m.crash(CrashMode::KeepWritten);
        let b = Broker::open_with_storage(cfg.clone(), system_clock(), Arc::new(crashed.clone()))
            .unwrap();
        let parts = b
            .replicas
            .logs()
            .logs()
            .iter()
            .filter(|l| l.topic_partition().topic == "orders")
            .count();
        assert_eq!(
            (b.topic("orders").map(|t| t.partitions), parts),
            (None, 0),
            "n={n}: a partial topic survived the restart"
        );
        let t = b
            .create_topic("orders", 50, 1, BTreeMap::new(), false)
            .unwrap();
        drop(b);
        let b = Broker::open_with_storage(
            cfg,
            system_clock(),
            Arc::new(crashed.crash(CrashMode::LoseUnsynced)),
        )
        .unwrap();
        assert_eq!(b.topic("orders"), Some(t));
        assert!((0..50).all(|p| b.replicas.log("orders", p).is_some()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_topic_table_and_malformed_checkpoints_do_not_refuse_the_start() {
    for garbage in [
        &b""[..],
        b"{\"version\":1,\"topics\":[{\"name\":\"a\",",
        b"\x00\xff",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let b = start_broker(dir.path(), &[]).await;
        let mut c = Client::connect(b.local_addr).await;
        assert_eq!(
            create_topic(&mut c, "a", 3, &[("retention.ms", "1234567")]).await,
            NONE
        );
        assert_eq!(create_topic(&mut c, "b-c", 1, &[]).await, NONE);
        assert_eq!(
            produce(&mut c, "a", 0, batch(&["x", "y"], 1_700_000_000_000), 1).await,
            (NONE, 0)
        );
        let before = metadata(&mut c, Some(vec!["a", "b-c"]), false).await;
        let ids: Vec<_> = before.topics.iter().map(|t| t.topic_id).collect();
        b.shutdown().await.unwrap();

        let d = dir.path();
        std::fs::write(d.join(TOPICS_FILE), garbage).unwrap();
        std::fs::write(d.join("recovery-point-offset-checkpoint"), b"0\n9\na 0 x\n").unwrap();
        std::fs::write(d.join("log-start-offset-checkpoint"), b"garbage").unwrap();
        // and an unclean shutdown, so recovery runs from offset 0
        std::fs::remove_file(d.join(".kafka_cleanshutdown")).unwrap();

        let b = start_broker(d, &[]).await;
        let mut c = Client::connect(b.local_addr).await;
        let after = metadata(&mut c, Some(vec!["a", "b-c"]), false).await;
        assert_eq!(partition_count(&after, "a"), Ok(3));
        assert_eq!(partition_count(&after, "b-c"), Ok(1));
        assert_eq!(
            after.topics.iter().map(|t| t.topic_id).collect::<Vec<_>>(),
            ids,
            "topic ids come from partition.metadata"
        );
        let (err, hw, values) = fetch(&mut c, 12, "a", Uuid::ZERO, 0, 0).await;
        assert_eq!((err, hw), (NONE, 2));
        assert_eq!(values, vec![(0, "x".to_string()), (1, "y".to_string())]);
        // The override was only in the lost file: the default applies now.
        let cfg = topic_config(&mut c, "a").await;
        assert_eq!(
            cfg["retention.ms"].1, DEFAULT_CONFIG,
            "{:?}",
            cfg["retention.ms"]
        );
        // The table was rewritten; the unreadable one was kept aside.
        let table: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join(TOPICS_FILE)).unwrap()).unwrap();
        assert_eq!(table["topics"].as_array().unwrap().len(), 2);
        assert_eq!(std::fs::read(d.join(CORRUPT_TOPICS_FILE)).unwrap(), garbage);
        b.shutdown().await.unwrap();
    }
}

async fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: weir\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf))
        .await
        .expect("HTTP response within 20 s")
        .unwrap();
    String::from_utf8(buf).unwrap()
}

async fn describe_log_dirs(c: &mut Client) -> Vec<(String, i16)> {
    let req = DescribeLogDirsRequest {
        topics: None,
        ..Default::default()
    };
    match c.call(RequestBody::DescribeLogDirs(req), 4).await {
        ResponseBody::DescribeLogDirs(r) => r
            .results
            .iter()
            .map(|d| (d.log_dir.clone(), d.error_code))
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_dir_that_cannot_be_written_at_start_is_offline_not_fatal() {
    let Some(fs) = Tmpfs::mount("size=64m") else {
        return;
    };
    let http = [("http.listeners", "127.0.0.1:0")];
    let b = start_broker(&fs.mnt, &http).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["kept"], 1_700_000_000_000), 1).await,
        (NONE, 0)
    );
    b.shutdown().await.unwrap();

    // Nothing can be written: the clean-shutdown marker cannot be removed.
    fs.remount("ro");
    let b = start_broker(&fs.mnt, &http).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        describe_log_dirs(&mut c).await,
        vec![(fs.mnt.display().to_string(), KAFKA_STORAGE_ERROR)]
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["lost"], 1_700_000_000_000), 1)
            .await
            .0,
        KAFKA_STORAGE_ERROR
    );
    let metrics = http_get(b.http_addr().unwrap(), "/metrics").await;
    assert!(
        metrics.lines().any(|l| l == "weir_log_dirs_offline 1"),
        "{metrics}"
    );
    b.shutdown().await.unwrap();

    fs.remount("rw");
    let b = start_broker(&fs.mnt, &http).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(
        describe_log_dirs(&mut c).await,
        vec![(fs.mnt.display().to_string(), NONE)]
    );
    assert_eq!(
        produce(&mut c, "t", 0, batch(&["new"], 1_700_000_000_000), 1).await,
        (NONE, 1)
    );
    let (_, hw, values) = fetch(&mut c, 12, "t", Uuid::ZERO, 0, 0).await;
    assert_eq!(hw, 2);
    assert_eq!(values[0], (0, "kept".to_string()));
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_at_start_serves_reads_and_refuses_writes_until_space_returns() {
    let Some(fs) = Tmpfs::mount("size=16m") else {
        return;
    };
    let b = start_broker(&fs.mnt, &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    assert_eq!(create_topic(&mut c, "t", 1, &[]).await, NONE);
    let values: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    assert_eq!(
        produce(&mut c, "t", 0, batch(&refs, 1_700_000_000_000), 1).await,
        (NONE, 0)
    );
    b.shutdown().await.unwrap();

    // Fill the disk to the last byte.
    let filler = fs.mnt.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        for chunk in [1 << 20, 4096, 1] {
            let block = vec![7u8; chunk];
            while f.write_all(&block).is_ok() {}
        }
    }
    let b = start_broker(&fs.mnt, &[]).await;
    let mut c = Client::connect(b.local_addr).await;
    let (err, hw, read) = fetch(&mut c, 12, "t", Uuid::ZERO, 0, 0).await;
    assert_eq!((err, hw, read.len()), (NONE, 20, 20));
    let big = "x".repeat(16 * 1024);
    assert_eq!(
        produce(&mut c, "t", 0, batch(&[&big], 1_700_000_000_001), 1)
            .await
            .0,
        KAFKA_STORAGE_ERROR
    );
    assert_eq!(describe_log_dirs(&mut c).await[0].1, NONE);
    std::fs::remove_file(&filler).unwrap();
    assert_eq!(
        produce(&mut c, "t", 0, batch(&[&big], 1_700_000_000_001), 1).await,
        (NONE, 20)
    );
    b.shutdown().await.unwrap();
}
