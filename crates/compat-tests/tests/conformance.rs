//! Kafka 4 conformance seen through real clients against `weir serve`:
//! offset commits to topics that do not exist are refused per partition,
//! authorized operations are reported when asked for, and a transactional
//! producer finds its coordinator and initializes while an idempotent one
//! keeps working. librdkafka through `rdkafka`, and
//! kafka-python.

use std::process::Command;
use std::time::Duration;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use weir_compat_tests::{
    WeirProcess, assert_checks_passed, client_timeout, run_with_timeout, skip_or_fail, tools,
};

const TIMEOUT: Duration = Duration::from_secs(30);

fn start_broker() -> WeirProcess {
    WeirProcess::start().unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

fn create_topic(broker: &WeirProcess, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .create()
        .expect("admin client");
    let opts = AdminOptions::new()
        .operation_timeout(Some(TIMEOUT))
        .request_timeout(Some(TIMEOUT));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let results = rt
        .block_on(admin.create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &opts,
        ))
        .expect("create_topics");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("create {t}: {e:?}"));
    }
}

#[test]
fn rdkafka_transactional_producer_initializes_and_idempotent_producer_works() {
    let broker = start_broker();
    create_topic(&broker, "txn-check", 1);

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("transactional.id", "weir-txn-check")
        .create()
        .expect("transactional producer");
    // FindCoordinator creates __transaction_state, InitProducerId gives the
    // transactional id its producer.
    producer
        .init_transactions(TIMEOUT)
        .expect("init_transactions");

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("enable.idempotence", "true")
        .create()
        .expect("idempotent producer");
    producer
        .send(BaseRecord::to("txn-check").key("k").payload("v"))
        .map_err(|(e, _)| e)
        .expect("enqueue");
    producer
        .flush(TIMEOUT)
        .expect("idempotent produce delivered");
}

#[test]
fn rdkafka_commit_to_a_missing_topic_is_refused() {
    let broker = start_broker();
    create_topic(&broker, "commit-known", 1);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("group.id", "commit-missing")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("commit-missing-topic", 0, Offset::Offset(5))
        .expect("offset");
    match consumer.commit(&tpl, CommitMode::Sync) {
        Err(KafkaError::ConsumerCommit(code)) => {
            assert_eq!(code, RDKafkaErrorCode::UnknownTopicOrPartition)
        }
        other => panic!("commit to a missing topic: {other:?}"),
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("commit-known", 0, Offset::Offset(5))
        .expect("offset");
    consumer
        .commit(&tpl, CommitMode::Sync)
        .expect("commit to an existing topic");
    let committed = consumer
        .committed_offsets(
            {
                let mut q = TopicPartitionList::new();
                q.add_partition("commit-known", 0);
                q.add_partition("commit-missing-topic", 0);
                q
            },
            TIMEOUT,
        )
        .expect("committed offsets");
    let offset = |t: &str| committed.find_partition(t, 0).map(|p| p.offset());
    assert_eq!(offset("commit-known"), Some(Offset::Offset(5)));
    assert_eq!(offset("commit-missing-topic"), Some(Offset::Invalid));
}

/// The kafka-python checks; each prints PASS or FAIL lines.
const PYTHON_CHECKS: &str = r#"
import sys, time
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
import kafka.errors as Errors

bootstrap = sys.argv[1]
def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + str(detail)), flush=True)

TOPIC = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
GROUP = {"READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CODES = {"READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
         "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12}
def bits(names):
    return sum(1 << CODES[n] for n in names)
def as_bits(ops):
    # kafka-python decodes some fields into operation names, leaves others as ints
    return ops if isinstance(ops, int) else bits(o if isinstance(o, str) else o.name for o in ops)

admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
from kafka.admin import NewTopic
admin.create_topics([NewTopic("py-known", 1, 1)])

topics = admin.describe_topics(["py-known"])
ops = topics[0].get("authorized_operations")
check("describe_topics topic_authorized_operations", ops is not None and as_bits(ops) == bits(TOPIC), ops)

CLUSTER = {"CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"}
# describe_cluster() asks through Metadata v8-v10 (v11+ dropped the field)
ops = admin.describe_cluster().get("authorized_operations")
check("describe_cluster authorized_operations", ops is not None and as_bits(ops) == bits(CLUSTER), ops)

res = admin.alter_group_offsets("py-group", {
    TopicPartition("py-known", 0): OffsetAndMetadata(3, "", -1),
    TopicPartition("py-missing", 0): OffsetAndMetadata(3, "", -1),
})
errs = {f"{tp.topic}/{tp.partition}": e.__name__ for tp, e in res.items()}
check("alter_group_offsets existing topic", errs.get("py-known/0") == "NoError", errs)
check("alter_group_offsets missing topic", errs.get("py-missing/0") == "UnknownTopicOrPartitionError", errs)

groups = admin.describe_groups(["py-group"])
ops = groups["py-group"].get("authorized_operations")
check("describe_groups authorized_operations", ops is not None and as_bits(ops) == bits(GROUP), ops)

try:
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="py-txn", max_block_ms=10000)
    p.init_transactions()
    check("transactional producer initializes", True)
    p.close()
except Exception as e:
    check("transactional producer initializes", False, repr(e))

p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
md = p.send("py-known", b"v").get(timeout=30)
check("idempotent producer works", md.offset >= 0, md)
p.close()
"#;

#[test]
fn kafka_python_conformance() {
    let Some(python) = tools::python() else {
        skip_or_fail("the kafka-python venv (.test-deps/venv, or WEIR_COMPAT_PYTHON)");
        return;
    };
    let broker = start_broker();
    let out = run_with_timeout(
        Command::new(&python)
            .args(["-c", PYTHON_CHECKS, broker.bootstrap()])
            .env("PYTHONUNBUFFERED", "1"),
        None,
        client_timeout(),
    )
    .expect("python spawns");
    println!("{}", out.stdout);
    assert_checks_passed(&out, &broker, "kafka-python conformance checks");
}
