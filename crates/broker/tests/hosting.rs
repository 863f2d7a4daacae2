//! `Broker::reconcile_hosted`: the partitions a metadata image assigns to
//! this broker get the same files as a local CreateTopics, lose them as a
//! local DeleteTopics does, a second call changes nothing, and a restart
//! keeps what is hosted (and, in a cluster, creates nothing else).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use weir_broker::Broker;
use weir_broker::broker::system_clock;
use weir_broker::cluster::HostedTopic;

use crate::common::*;

fn single_config(dir: &Path) -> weir_broker::BrokerConfig {
    let mut s = ConfigSources::default();
    s.set("listeners", "127.0.0.1:0");
    s.set("log.dirs", &dir.display().to_string());
    s.build().unwrap()
}

/// A node of a two-voter cluster (`is_cluster()`); only opened, never
/// started, so its listeners are not bound.
fn cluster_config(dir: &Path) -> weir_broker::BrokerConfig {
    let mut s = ConfigSources::default();
    s.set(
        "listeners",
        "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093",
    );
    s.set("controller.listener.names", "CONTROLLER");
    s.set("process.roles", "broker,controller");
    s.set("node.id", "1");
    s.set(
        "controller.quorum.voters",
        "1@127.0.0.1:19093,2@127.0.0.1:29093",
    );
    s.set("log.dirs", &dir.display().to_string());
    let c = s.build().unwrap();
    assert!(c.is_cluster());
    c
}

/// Paths (relative to `dir`) of everything under directories of `topic`.
fn topic_files(dir: &Path, topic: &str) -> BTreeSet<String> {
    fn walk(root: &Path, at: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(at).unwrap() {
            let p = e.unwrap().path();
            out.insert(p.strip_prefix(root).unwrap().display().to_string());
            if p.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let mut all = BTreeSet::new();
    walk(dir, dir, &mut all);
    all.into_iter()
        .filter(|p| p.starts_with(&format!("{topic}-")) || p.starts_with(&format!("{topic}.")))
        .collect()
}

fn hosted(name: &str, id: [u8; 16], partitions: &[i32]) -> HostedTopic {
    HostedTopic {
        name: name.into(),
        id,
        partitions: partitions.to_vec(),
        configs: BTreeMap::new(),
    }
}

fn reconcile(b: &Broker, topics: &[HostedTopic]) {
    let guard = b.admin.try_lock().unwrap();
    let errors = b.reconcile_hosted(&guard, topics);
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn hosting_makes_and_removes_the_files_local_admin_does() {
    let local_dir = tempfile::tempdir().unwrap();
    let hosted_dir = tempfile::tempdir().unwrap();
    let local = Broker::open(single_config(local_dir.path()), system_clock()).unwrap();
    let meta = local
        .create_topic("t", 3, 1, BTreeMap::new(), false)
        .unwrap();
    let b = Broker::open(single_config(hosted_dir.path()), system_clock()).unwrap();
    reconcile(&b, &[hosted("t", meta.id_bytes(), &[0, 1, 2])]);

    let files = topic_files(hosted_dir.path(), "t");
    assert!(files.contains("t-2/partition.metadata"), "{files:?}");
    assert_eq!(files, topic_files(local_dir.path(), "t"));
    for p in 0..3 {
        let f = format!("t-{p}/partition.metadata");
        assert_eq!(
            std::fs::read(hosted_dir.path().join(&f)).unwrap(),
            std::fs::read(local_dir.path().join(&f)).unwrap()
        );
    }
    assert_eq!(b.topic("t"), Some(meta));

    local.delete_topic("t").unwrap();
    reconcile(&b, &[]);
    assert_eq!(topic_files(hosted_dir.path(), "t"), BTreeSet::new());
    assert_eq!(topic_files(local_dir.path(), "t"), BTreeSet::new());
    assert!(b.topic("t").is_none() && b.replicas.log("t", 0).is_none());
}

#[test]
fn hosting_the_same_partitions_again_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::open(cluster_config(dir.path()), system_clock()).unwrap();
    let h = [hosted("h", [5; 16], &[0, 2])];
    reconcile(&b, &h);
    let log = b.replicas.log("h", 0).unwrap();
    log.append(&mut batch(&["kept"], 1).to_vec(), 1).unwrap();
    let files = topic_files(dir.path(), "h");
    let table = std::fs::read(dir.path().join("weir-topics.json")).unwrap();
    let modified = std::fs::metadata(dir.path().join("weir-topics.json"))
        .unwrap()
        .modified()
        .unwrap();

    reconcile(&b, &h);
    assert!(Arc::ptr_eq(&log, &b.replicas.log("h", 0).unwrap()));
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(topic_files(dir.path(), "h"), files);
    assert_eq!(
        std::fs::read(dir.path().join("weir-topics.json")).unwrap(),
        table
    );
    let again = std::fs::metadata(dir.path().join("weir-topics.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(again, modified);
}

#[test]
fn a_restart_keeps_hosted_partitions_and_creates_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let configs = BTreeMap::from([("retention.ms".to_string(), "123456".to_string())]);
    {
        let b = Broker::open(cluster_config(dir.path()), system_clock()).unwrap();
        let mut h = hosted("h", [5; 16], &[0, 2]);
        h.configs = configs.clone();
        reconcile(&b, &[h]);
        b.replicas
            .log("h", 2)
            .unwrap()
            .append(&mut batch(&["a", "b"], 1).to_vec(), 1)
            .unwrap();
        b.replicas.shutdown().unwrap();
    }
    let b = Broker::open(cluster_config(dir.path()), system_clock()).unwrap();
    assert_eq!(b.replicas.log("h", 2).unwrap().log_end_offset(), 2);
    assert_eq!(b.replicas.log("h", 2).unwrap().topic_id(), [5; 16]);
    assert!(b.replicas.log("h", 0).is_some());
    // partition 1 is hosted elsewhere: the table's partition count does not
    // make this broker create it
    assert!(b.replicas.log("h", 1).is_none());
    assert_eq!(b.topic("h").unwrap().configs, configs);
    assert_eq!(
        b.replicas.log("h", 0).unwrap().config().retention_ms,
        123_456
    );

    // moved away, and a topic recreated under the same name: the old logs
    // go, the new id's come
    reconcile(&b, &[hosted("h", [6; 16], &[1])]);
    assert!(b.replicas.log("h", 0).is_none() && b.replicas.log("h", 2).is_none());
    assert_eq!(b.replicas.log("h", 1).unwrap().topic_id(), [6; 16]);
    assert_eq!(b.replicas.log("h", 1).unwrap().log_end_offset(), 0);
    reconcile(&b, &[hosted("h", [6; 16], &[0, 1])]);
    assert!(b.replicas.log("h", 0).is_some());
    reconcile(&b, &[hosted("h", [6; 16], &[1])]);
    assert!(b.replicas.log("h", 0).is_none());
    b.replicas.shutdown().unwrap();
    drop(b);
    let b = Broker::open(cluster_config(dir.path()), system_clock()).unwrap();
    let files: Vec<_> = topic_files(dir.path(), "h")
        .into_iter()
        .filter(|f| !f.contains('/'))
        .collect();
    assert_eq!(files, vec!["h-1".to_string()]);
    assert!(b.replicas.log("h", 1).is_some());
}
