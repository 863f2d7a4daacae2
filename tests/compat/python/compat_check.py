#!/usr/bin/env python3
"""kafka-python compatibility checks against a running weir broker.

Usage: compat_check.py --bootstrap HOST:PORT [--records N] [--partitions P]

Every check prints one line, `PASS <name>` or `FAIL <name>: <reason>`, and
the script exits non-zero if any check failed. It only uses the public
kafka-python API: KafkaAdminClient, KafkaProducer, KafkaConsumer.
"""

import argparse
import sys
import time
import traceback
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.partitioner import murmur2

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

RESULTS = []


def run_check(name, fn, *args):
    """Run one check, print PASS/FAIL, record the outcome.

    Returns the check's value (True if it returned None), or None on failure.
    """
    started = time.monotonic()
    try:
        value = fn(*args)
    except Exception as exc:  # noqa: BLE001 - any failure is a FAIL line
        took = time.monotonic() - started
        print(f"FAIL {name}: {type(exc).__name__}: {exc} ({took:.1f}s)", flush=True)
        traceback.print_exc(file=sys.stderr)
        RESULTS.append((name, False))
        return None
    took = time.monotonic() - started
    print(f"PASS {name} ({took:.1f}s)", flush=True)
    RESULTS.append((name, True))
    return True if value is None else value


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def java_partition(key, partitions):
    # Kafka's DefaultPartitioner: toPositive(murmur2(key)) % numPartitions.
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def check_murmur2_vectors():
    # From Kafka's UtilsTest.testMurmur2.
    vectors = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536}
    for data, want in vectors.items():
        got = murmur2(data)
        # kafka-python returns the unsigned 32-bit value; compare as signed.
        if got >= 2**31:
            got -= 2**32
        expect(got == want, f"murmur2({data!r}) = {got}, Java gives {want}")


def check_create_topic(admin, topic, partitions):
    admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
    deadline = time.monotonic() + 15
    while True:
        topics = {t["name"]: t for t in admin.describe_topics([topic])}
        info = topics.get(topic)
        if info and info.get("error_code", 0) == 0 and len(info.get("partitions") or []) == partitions:
            leaders = [p.get("leader_id", -1) for p in info["partitions"]]
            expect(all(l >= 0 for l in leaders), f"partitions without leader: {info['partitions']}")
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topic not visible with {partitions} partitions: {info}")
        time.sleep(0.1)


def check_validate_only(admin):
    name = f"py-validate-{uuid.uuid4().hex[:8]}"
    admin.create_topics({name: {"num_partitions": 1, "replication_factor": 1}}, validate_only=True)
    expect(name not in admin.list_topics(), f"{name} exists after validate_only")


def produce(bootstrap, topic, codec, records, base_ts):
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
        request_timeout_ms=30000,
        max_block_ms=30000,
    )
    try:
        futures = []
        for i in range(records):
            key = f"key-{i}".encode()
            value = f"value-{i}-{codec}-".encode() + b"x" * (i % 97)
            headers = [("idx", str(i).encode()), ("codec", codec.encode())]
            futures.append(
                producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=base_ts + i)
            )
        producer.flush(timeout=120)
        metas = [f.get(timeout=60) for f in futures]
    finally:
        producer.close(timeout=10)
    return metas


def consume_all(bootstrap, topic, partitions, expected):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=30000,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out = []
        deadline = time.monotonic() + 120
        while len(out) < expected and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=1000)
            for recs in batch.values():
                out.extend(recs)
        return out
    finally:
        consumer.close()


def check_round_trip(bootstrap, topic, codec, partitions, records, base_ts):
    metas = produce(bootstrap, topic, codec, records, base_ts)
    for i, m in enumerate(metas):
        key = f"key-{i}".encode()
        want = java_partition(key, partitions)
        expect(m.partition == want, f"record {i} acked on partition {m.partition}, murmur2 says {want}")
    got = consume_all(bootstrap, topic, partitions, records)
    expect(len(got) == records, f"consumed {len(got)} of {records} records")
    seen = set()
    last = {}
    for r in got:
        headers = dict(r.headers)
        expect("idx" in headers, f"record at {r.partition}/{r.offset} has no idx header: {r.headers}")
        i = int(headers["idx"])
        expect(i not in seen, f"record {i} delivered twice")
        seen.add(i)
        expect(r.key == f"key-{i}".encode(), f"record {i}: key {r.key!r}")
        want_value = f"value-{i}-{codec}-".encode() + b"x" * (i % 97)
        expect(r.value == want_value, f"record {i}: value {r.value!r}")
        expect(headers.get("codec") == codec.encode(), f"record {i}: headers {r.headers}")
        expect(r.timestamp == base_ts + i, f"record {i}: timestamp {r.timestamp}, sent {base_ts + i}")
        want_p = java_partition(r.key, partitions)
        expect(r.partition == want_p, f"record {i} read from partition {r.partition}, murmur2 says {want_p}")
        expect(metas[i].offset == r.offset, f"record {i}: acked offset {metas[i].offset}, read at {r.offset}")
        prev = last.get(r.partition)
        if prev is not None:
            expect(r.offset > prev[0], f"partition {r.partition}: offset {r.offset} after {prev[0]}")
            expect(i > prev[1], f"partition {r.partition}: record {i} after record {prev[1]} (order broken)")
        last[r.partition] = (r.offset, i)
    return got


def check_offsets(bootstrap, topic, partitions, records, base_ts):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        # Where each record went (the partitioner is deterministic).
        per_part = {p: [] for p in range(partitions)}
        for i in range(records):
            per_part[java_partition(f"key-{i}".encode(), partitions)].append(i)
        begin = consumer.beginning_offsets(tps)
        end = consumer.end_offsets(tps)
        for tp in tps:
            expect(begin[tp] == 0, f"{tp}: beginning offset {begin[tp]}")
            expect(end[tp] == len(per_part[tp.partition]), f"{tp}: end offset {end[tp]}, produced {len(per_part[tp.partition])}")
        query_i = records // 2
        query_ts = base_ts + query_i
        found = consumer.offsets_for_times({tp: query_ts for tp in tps})
        for tp in tps:
            idxs = per_part[tp.partition]
            # Offsets within a partition follow produce order; the answer is
            # the first record whose timestamp >= the query.
            first = next((n for n, i in enumerate(idxs) if base_ts + i >= query_ts), None)
            got = found.get(tp)
            if first is None:
                expect(got is None, f"{tp}: expected no offset for ts {query_ts}, got {got}")
            else:
                expect(got is not None, f"{tp}: no offset for ts {query_ts}")
                expect(got.offset == first, f"{tp}: offset for ts {query_ts} is {got.offset}, expected {first}")
                expect(got.timestamp == base_ts + idxs[first], f"{tp}: timestamp {got.timestamp}")
        future = consumer.offsets_for_times({tp: base_ts + records + 10_000 for tp in tps})
        for tp in tps:
            expect(future.get(tp) is None, f"{tp}: a timestamp after all records gave {future.get(tp)}")
    finally:
        consumer.close()


def check_configs(admin, topic):
    res = ConfigResource(ConfigResourceType.TOPIC, topic)
    described = admin.describe_configs([res], config_filter="all")
    configs = described.get("topic", {}).get(topic)
    expect(configs, f"no configs for {topic}: {described}")
    for name in ("retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes"):
        expect(name in configs, f"{name} missing from describe_configs: {sorted(configs)}")
    expect(configs["cleanup.policy"]["value"] == "delete", f"cleanup.policy = {configs['cleanup.policy']}")
    result = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": "123456789"})])
    expect(result.get("topic", {}).get(topic) == "OK", f"alter_configs answered {result}")
    after = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    entry = after["topic"][topic]["retention.ms"]
    expect(entry["value"] == "123456789", f"retention.ms after alter: {entry}")
    expect(entry["config_source"] == "DYNAMIC_TOPIC_CONFIG", f"retention.ms source after alter: {entry}")


def check_delete(admin, topic):
    admin.delete_topics([topic])
    deadline = time.monotonic() + 15
    while topic in admin.list_topics():
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic} still listed after delete_topics")
        time.sleep(0.1)


def group_consume(bootstrap, topic, group, limit, deadline_s=60):
    """Consumes with a group member until `limit` records or the deadline,
    commits synchronously, closes; returns the values read."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=30000,
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
    )
    out = []
    try:
        deadline = time.monotonic() + deadline_s
        while len(out) < limit and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=500, max_records=50)
            for recs in batch.values():
                out.extend(r.value for r in recs)
        consumer.commit()
    finally:
        consumer.close()
    return out


def check_group_consumer(bootstrap, admin, topic, records):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(records):
            producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)
    group = f"py-group-{uuid.uuid4().hex[:8]}"
    first = group_consume(bootstrap, topic, group, records // 2)
    expect(len(first) >= records // 2, f"first member read {len(first)} of {records // 2}")
    # a second member of the same group resumes from the committed offsets
    rest = group_consume(bootstrap, topic, group, records - len(first))
    values = first + rest
    expect(len(values) == records, f"read {len(values)} records in total, expected {records}")
    expect(len(set(values)) == records, "a record was read twice across the two members")
    listed = [g[0] if isinstance(g, tuple) else g.get("group_id") for g in admin.list_groups()]
    expect(group in listed, f"{group} missing from list_groups: {listed}")
    offsets = admin.list_group_offsets({group: None})[group]
    committed = sum(m.offset for m in offsets.values())
    expect(committed == records, f"committed offsets sum to {committed}, expected {records}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--records", type=int, default=2000, help="records per codec")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--codecs", default=",".join(CODECS))
    ap.add_argument(
        "--keep-topics",
        action="store_true",
        help="keep the per-codec topics (the caller inspects the stored batches); "
        "the delete check then uses a topic of its own",
    )
    args = ap.parse_args()
    codecs = [c for c in args.codecs.split(",") if c]

    run_id = uuid.uuid4().hex[:8]
    run_check("murmur2 matches Kafka's Java vectors", check_murmur2_vectors)
    admin = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=30000)
    except Exception as exc:  # noqa: BLE001
        print(f"FAIL admin: connect to {args.bootstrap}: {type(exc).__name__}: {exc}", flush=True)
        RESULTS.append(("admin connect", False))
    if admin is not None:
        try:
            run_check("admin: create topic validate_only does not create it", check_validate_only, admin)
            created = []
            for codec in codecs:
                topic = f"py-{codec}-{run_id}"
                # Timestamps in the past, distinct per record.
                base_ts = int(time.time() * 1000) - 3_600_000
                if not run_check(f"admin: create topic [{codec}]", check_create_topic, admin, topic, args.partitions):
                    continue
                created.append(topic)
                ok = run_check(
                    f"produce + consume round trip, murmur2 partitions [{codec}]",
                    check_round_trip, args.bootstrap, topic, codec, args.partitions, args.records, base_ts,
                )
                if ok:
                    # For the caller: which topic holds which client codec.
                    print(f"TOPIC {codec} {topic} {args.partitions}", flush=True)
                    run_check(
                        f"offsets_for_times / beginning_offsets / end_offsets [{codec}]",
                        check_offsets, args.bootstrap, topic, args.partitions, args.records, base_ts,
                    )
            group_topic = f"py-group-{run_id}"
            if run_check("admin: create topic [group]", check_create_topic, admin, group_topic, 3):
                run_check(
                    "consumer group: commit, close, second member resumes",
                    check_group_consumer, args.bootstrap, admin, group_topic, 300,
                )
            if created:
                run_check("admin: describe_configs / alter_configs", check_configs, admin, created[0])
                if args.keep_topics:
                    doomed = f"py-delete-{run_id}"
                    if run_check("admin: create topic [delete]", check_create_topic, admin, doomed, 1):
                        run_check(f"admin: delete topic {doomed}", check_delete, admin, doomed)
                else:
                    for topic in created:
                        run_check(f"admin: delete topic {topic}", check_delete, admin, topic)
        finally:
            admin.close()

    passed = sum(1 for _, ok in RESULTS if ok)
    failed = len(RESULTS) - passed
    print(f"kafka-python summary: {passed} checks passed, {failed} checks failed", flush=True)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
