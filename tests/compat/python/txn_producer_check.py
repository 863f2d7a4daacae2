#!/usr/bin/env python3
"""Transactional producers with kafka-python, against the transaction
coordinator. Checks:

  visibility  committed transactions are read by a read_committed consumer,
              aborted ones are not (a read_uncommitted consumer reads both)
  fencing     a second producer with the same transactional.id fences the
              first: its next transaction fails with ProducerFencedError
  timeout     a transaction left open past its transaction.timeout.ms is
              aborted by the coordinator: read_committed consumers get past
              it without its records, and its producer's commit fails

The broker must run with a short
`transaction.abort.timed.out.transaction.cleanup.interval.ms`. Every check
prints one line, `PASS <name>` or `FAIL <name>: <reason>`; the script exits
non-zero if any failed. Every wait is bounded.
"""

import argparse
import sys
import time
import traceback
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
import kafka.errors as Errors

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


def transactional(bootstrap, tid, **kw):
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=tid,
        request_timeout_ms=30000,
        max_block_ms=30000,
        **kw,
    )
    p.init_transactions()
    return p


def read_all(bootstrap, topic, partitions, isolation):
    """Every value of `topic` up to the end a consumer at `isolation` sees
    (the LSO for read_committed, the high watermark otherwise)."""
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        request_timeout_ms=30000,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        values = []
        deadline = time.monotonic() + 30
        while any(c.position(tp) < end[tp] for tp in tps):
            expect(time.monotonic() < deadline, f"not read to {end} within 30 s")
            for records in c.poll(timeout_ms=500).values():
                values.extend(r.value.decode() for r in records)
        return sorted(values)
    finally:
        c.close()


def check_visibility(bootstrap, topic):
    p = transactional(bootstrap, f"vis-{uuid.uuid4().hex[:8]}")
    try:
        p.begin_transaction()
        for i in range(4):
            p.send(topic, key=b"k%d" % i, value=b"committed-%d" % i)
        p.commit_transaction()
        p.begin_transaction()
        for i in range(3):
            p.send(topic, key=b"k%d" % i, value=b"aborted-%d" % i)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, key=b"z", value=b"committed-last")
        p.commit_transaction()
    finally:
        p.close(timeout=10)
    committed = [f"committed-{i}" for i in range(4)] + ["committed-last"]
    got = read_all(bootstrap, topic, 2, "read_committed")
    expect(got == sorted(committed), f"read_committed: {got}")
    got = read_all(bootstrap, topic, 2, "read_uncommitted")
    expect(got == sorted(committed + [f"aborted-{i}" for i in range(3)]), f"read_uncommitted: {got}")


def check_fencing(bootstrap, topic):
    tid = f"fence-{uuid.uuid4().hex[:8]}"
    first = transactional(bootstrap, tid)
    second = None
    try:
        first.begin_transaction()
        first.send(topic, value=b"first-committed")
        first.commit_transaction()
        second = transactional(bootstrap, tid)
        fenced = None
        try:
            first.begin_transaction()
            first.send(topic, value=b"zombie")
            first.commit_transaction()
        except Exception as exc:  # noqa: BLE001
            fenced = exc
        expect(
            isinstance(fenced, Errors.ProducerFencedError)
            or "ProducerFenced" in repr(fenced)
            or "InvalidProducerEpoch" in repr(fenced),
            f"the first producer was not fenced: {fenced!r}",
        )
        second.begin_transaction()
        second.send(topic, value=b"second-committed")
        second.commit_transaction()
    finally:
        first.close(timeout=10)
        if second is not None:
            second.close(timeout=10)


def check_timeout(bootstrap, topic):
    p = transactional(bootstrap, f"slow-{uuid.uuid4().hex[:8]}", transaction_timeout_ms=1000)
    try:
        p.begin_transaction()
        p.send(topic, value=b"left-open")
        p.flush()
        # The coordinator aborts it: a read_committed consumer's end (the
        # LSO) reaches the high watermark, past the ABORT marker.
        tp = TopicPartition(topic, 0)
        c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
        plain = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_uncommitted")
        try:
            deadline = time.monotonic() + 30
            while c.end_offsets([tp])[tp] < plain.end_offsets([tp])[tp]:
                expect(time.monotonic() < deadline, "the open transaction was not aborted within 30 s")
                time.sleep(0.1)
        finally:
            c.close()
            plain.close()
        failed = None
        try:
            p.commit_transaction()
        except Exception as exc:  # noqa: BLE001
            failed = exc
        expect(failed is not None, "committing an aborted transaction succeeded")
    finally:
        p.close(timeout=10)
    got = read_all(bootstrap, topic, 1, "read_committed")
    expect("left-open" not in got, f"read_committed read the aborted record: {got}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    args = ap.parse_args()
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=30000)
    suffix = uuid.uuid4().hex[:8]
    topics = {name: f"txn-{name}-{suffix}" for name in ["vis", "fence", "slow"]}
    create_topic(admin, topics["vis"], 2)
    create_topic(admin, topics["fence"], 1)
    create_topic(admin, topics["slow"], 1)
    run_check("visibility", check_visibility, args.bootstrap, topics["vis"])
    run_check("fencing", check_fencing, args.bootstrap, topics["fence"])
    run_check("timeout", check_timeout, args.bootstrap, topics["slow"])
    admin.close()
    return 0 if RESULTS and all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
