#!/usr/bin/env python3
"""kafka-python against a running weir cluster: the brokers and the
controller it sees, the replicas of a topic, and records that another client
produced with keys `key-<i>` and values `value-<i>`, read back by assignment.

Usage: cluster_check.py --bootstrap H:P,H:P,H:P --brokers 1,2,3
         --controller ID --topic T --partitions P --replicas R --records N

Every check prints one line, `PASS <name>` or `FAIL <name>: <reason>`, and
the script exits non-zero if any check failed.
"""

import argparse
import sys
import time
import traceback

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.partitioner import murmur2

RESULTS = []


def run_check(name, fn, *args):
    started = time.monotonic()
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - any failure is a FAIL line
        took = time.monotonic() - started
        print(f"FAIL {name}: {type(exc).__name__}: {exc} ({took:.1f}s)", flush=True)
        traceback.print_exc(file=sys.stderr)
        RESULTS.append((name, False))
        return
    took = time.monotonic() - started
    print(f"PASS {name} ({took:.1f}s)", flush=True)
    RESULTS.append((name, True))


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def java_partition(key, partitions):
    # Kafka's DefaultPartitioner: toPositive(murmur2(key)) % numPartitions.
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def check_cluster(args):
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, client_id="weir-compat-cluster")
    try:
        d = admin.describe_cluster()
    finally:
        admin.close()
    ids = sorted(b["broker_id"] for b in d["brokers"])
    expect(ids == args.brokers, f"brokers {ids}, want {args.brokers}")
    expect(d["controller_id"] == args.controller, f"controller {d['controller_id']}, want {args.controller}")


def check_replicas(args):
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, client_id="weir-compat-cluster")
    try:
        (topic,) = admin.describe_topics([args.topic])
    finally:
        admin.close()
    parts = topic["partitions"]
    expect(len(parts) == args.partitions, f"{len(parts)} partitions")
    for p in parts:
        index, replicas, leader = p["partition_index"], p["replica_nodes"], p["leader_id"]
        expect(len(set(replicas)) == args.replicas, f"partition {index}: replicas {replicas}")
        expect(leader in replicas, f"partition {index}: leader {leader} not a replica")


def check_consume(args):
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        client_id="weir-compat-cluster",
        enable_auto_commit=False,
        consumer_timeout_ms=1000,
    )
    try:
        tps = [TopicPartition(args.topic, p) for p in range(args.partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        seen = set()
        deadline = time.monotonic() + 60
        while len(seen) < args.records and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                for m in batch:
                    key = m.key.decode()
                    i = int(key[len("key-"):])
                    expect(i not in seen, f"record {i} delivered twice")
                    expect(m.value == f"value-{i}".encode(), f"value of {key}: {m.value!r}")
                    want = java_partition(m.key, args.partitions)
                    expect(m.partition == want, f"{key} on partition {m.partition}, want {want}")
                    seen.add(i)
        expect(len(seen) == args.records, f"consumed {len(seen)} of {args.records}")
    finally:
        consumer.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True, type=lambda s: s.split(","))
    parser.add_argument("--brokers", required=True, type=lambda s: sorted(int(x) for x in s.split(",")))
    parser.add_argument("--controller", required=True, type=int)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", required=True, type=int)
    parser.add_argument("--replicas", required=True, type=int)
    parser.add_argument("--records", required=True, type=int)
    args = parser.parse_args()
    run_check("describe_cluster: every broker and the controller", check_cluster, args)
    run_check(f"describe_topics: {args.partitions} partitions of {args.replicas} distinct replicas", check_replicas, args)
    run_check("assigned consumer reads every record on its key partition", check_consume, args)
    passed = sum(1 for _, ok in RESULTS if ok)
    failed = len(RESULTS) - passed
    print(f"kafka-python summary: {passed} checks passed, {failed} checks failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
