#!/usr/bin/env python3
"""Consumer group offsets committed in transactions, with kafka-python.

A transactional producer commits a group's offsets with
send_offsets_to_transaction (AddOffsetsToTxn + TxnOffsetCommit). Checks:

  commit    the offsets are the group's once the transaction commits, for a
            read_committed consumer and for the admin client
  abort     a later transaction's offsets are dropped when it aborts; the
            committed ones stay
  unstable  while a transaction with offsets is open, a read_committed
            consumer's committed() (OffsetFetch with require_stable) keeps
            retrying UNSTABLE_OFFSET_COMMIT and returns the transaction's
            offset only after it commits; a read_uncommitted one gets the
            stable (here: no) offset at once

Every check prints one line, `PASS <name>` or `FAIL <name>: <reason>`, and
the script exits non-zero if any check failed. Every wait is bounded.
"""

import argparse
import sys
import threading
import time
import traceback
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

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
    print(f"PASS {name} ({time.monotonic() - started:.1f}s)", flush=True)
    RESULTS.append((name, True))


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def create_topic(admin, topic, partitions):
    admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
    deadline = time.monotonic() + 15
    while True:
        info = {t["name"]: t for t in admin.describe_topics([topic])}.get(topic)
        if info and info.get("error_code", 0) == 0 and len(info.get("partitions") or []) == partitions:
            return
        expect(time.monotonic() < deadline, f"topic {topic} not visible: {info}")
        time.sleep(0.1)


def transactional(bootstrap, tid):
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=tid,
        request_timeout_ms=30000,
        max_block_ms=30000,
    )
    p.init_transactions()
    return p


def consumer(bootstrap, group, isolation):
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        isolation_level=isolation,
        enable_auto_commit=False,
        request_timeout_ms=30000,
    )


def group_offsets(admin, group, topic):
    offsets = admin.list_group_offsets({group: None})[group]
    return {tp.partition: m.offset for tp, m in offsets.items() if tp.topic == topic and m.offset >= 0}


def in_transaction(producer, out_topic, offsets, group, commit):
    """One transaction: a record to `out_topic` and `offsets` for `group`."""
    producer.begin_transaction()
    producer.send(out_topic, b"processed")
    producer.send_offsets_to_transaction(
        {tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()}, group
    )
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()


def check_commit_then_abort(bootstrap, admin, source, out):
    group = f"txn-offsets-{uuid.uuid4().hex[:8]}"
    tps = [TopicPartition(source, p) for p in range(2)]
    producer = transactional(bootstrap, f"tx-{group}")
    reader = consumer(bootstrap, group, "read_committed")
    try:
        in_transaction(producer, out, {tps[0]: 5, tps[1]: 7}, group, commit=True)
        got = [reader.committed(tp) for tp in tps]
        expect(got == [5, 7], f"read_committed committed() after COMMIT: {got}")
        admin_view = group_offsets(admin, group, source)
        expect(admin_view == {0: 5, 1: 7}, f"admin after COMMIT: {admin_view}")

        in_transaction(producer, out, {tps[0]: 8}, group, commit=False)
        got = [reader.committed(tp) for tp in tps]
        expect(got == [5, 7], f"read_committed committed() after ABORT: {got}")
        admin_view = group_offsets(admin, group, source)
        expect(admin_view == {0: 5, 1: 7}, f"admin after ABORT: {admin_view}")
    finally:
        reader.close()
        producer.close(timeout=10)


def check_unstable_until_commit(bootstrap, source, out):
    group = f"txn-unstable-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(source, 0)
    producer = transactional(bootstrap, f"tx-{group}")
    stable = consumer(bootstrap, group, "read_committed")
    plain = consumer(bootstrap, group, "read_uncommitted")
    try:
        producer.begin_transaction()
        producer.send(out, b"pending")
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(3, "", -1)}, group)
        got = plain.committed(tp)
        expect(got is None, f"read_uncommitted committed() while open: {got}")
        committed_at = []

        def finish():
            time.sleep(2)
            committed_at.append(time.monotonic())
            producer.commit_transaction()

        t = threading.Thread(target=finish)
        t.start()
        got = stable.committed(tp)
        returned_at = time.monotonic()
        t.join(timeout=60)
        expect(committed_at, "the transaction was not committed")
        expect(got == 3, f"read_committed committed(): {got}")
        expect(
            returned_at >= committed_at[0],
            "read_committed committed() returned before the transaction committed",
        )
    finally:
        stable.close()
        plain.close()
        producer.close(timeout=10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    args = ap.parse_args()
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=30000)
    suffix = uuid.uuid4().hex[:8]
    source, out = f"txn-src-{suffix}", f"txn-out-{suffix}"
    create_topic(admin, source, 2)
    create_topic(admin, out, 1)
    run_check("commit and abort", check_commit_then_abort, args.bootstrap, admin, source, out)
    run_check("unstable until commit", check_unstable_until_commit, args.bootstrap, source, out)
    admin.close()
    return 0 if RESULTS and all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
