#!/usr/bin/env python3
"""Transactional producers with kafka-python against a weir broker.

Checks, each on its own single-partition topic:

  read_committed     a transaction commits a batch, the next one aborts a
                     batch, a last one commits an end record: a
                     read_committed consumer reads the committed batch and
                     the end record and nothing else
  read_uncommitted   the same log read_uncommitted: both batches in log
                     order, the two markers taking an offset each but never
                     handed out
  lso                while a transaction is open, a read_committed
                     consumer's end offset (ListOffsets) stays at the last
                     stable offset and a read_uncommitted one's is the high
                     watermark; the commit moves it past the marker
  fenced at commit   a second producer with the same transactional_id
                     fences the first: the old one's commit raises
                     ProducerFencedError, its open transaction is aborted
                     (read_uncommitted sees its records, read_committed
                     does not), the new one's transaction commits
  fenced at send     the same, the old producer's next send after the fence
                     failing with InvalidProducerEpochError (the partition
                     has the newer epoch of the abort marker, and Kafka
                     answers a produce from an older epoch so); the client's
                     attempt to recover by bumping its epoch (InitProducerId
                     with its old epoch) is refused PRODUCER_FENCED, after
                     which its commit fails naming ProducerFencedError
  fenced between     the old producer has committed and is idle when the new
                     one starts: its next transaction fails fenced
                     (ProducerFencedError or InvalidProducerEpochError)
  two partitions     transactions over the two partitions of a topic, keyed:
                     read_committed reads the committed ones of both
                     partitions, read_uncommitted the aborted one too
  timeout            a transaction left open past its transaction.timeout.ms
                     is aborted by the coordinator: the read_committed end
                     offset (the LSO) reaches the high watermark, its
                     producer's commit fails, read_committed never reads it

The broker must run with a short
`transaction.abort.timed.out.transaction.cleanup.interval.ms` (timeout).
A reader never waits for records to stop coming: every transaction is
followed by a committed end record, and reading stops when it arrives
(records of a partition are read in order), or it reads up to the end
offsets it was given. Every check prints one line,
`PASS <name>: <what was seen>` or `FAIL <name>: <reason>`, and the script
exits non-zero if any check failed. Every wait is bounded.
"""

import argparse
import sys
import time
import traceback
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError

RESULTS = []
TIMEOUT_S = 30


def run_check(name, fn, *args):
    started = time.monotonic()
    try:
        seen = fn(*args)
    except Exception as exc:  # noqa: BLE001 - any failure is a FAIL line
        took = time.monotonic() - started
        print(f"FAIL {name}: {type(exc).__name__}: {exc} ({took:.1f}s)", flush=True)
        traceback.print_exc(file=sys.stderr)
        RESULTS.append((name, False))
        return
    print(f"PASS {name}: {seen} ({time.monotonic() - started:.1f}s)", flush=True)
    RESULTS.append((name, True))


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def create_topic(admin, topic, partitions=1):
    """Creates `topic` and waits until it is visible; its partition 0."""
    admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        info = {t["name"]: t for t in admin.describe_topics([topic])}.get(topic)
        if info and info.get("error_code", 0) == 0 and len(info.get("partitions") or []) == partitions:
            return TopicPartition(topic, 0)
        expect(time.monotonic() < deadline, f"topic {topic} not visible: {info}")
        time.sleep(0.1)


def transactional(bootstrap, tid, transaction_timeout_ms=60000):
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=tid,
        transaction_timeout_ms=transaction_timeout_ms,
        request_timeout_ms=TIMEOUT_S * 1000,
        max_block_ms=TIMEOUT_S * 1000,
    )
    p.init_transactions()
    return p


def values(prefix, n):
    return [f"{prefix}-{i}" for i in range(n)]


def send_all(producer, tp, vals):
    """Sends `vals` and waits until the broker has written every one."""
    futures = [producer.send(tp.topic, v.encode(), partition=tp.partition) for v in vals]
    return [f.get(timeout=TIMEOUT_S).offset for f in futures]


def committed_txn(producer, tp, vals, commit=True):
    producer.begin_transaction()
    offsets = send_all(producer, tp, vals)
    if commit:
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    return offsets


def consumer(bootstrap, isolation):
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        isolation_level=isolation,
        enable_auto_commit=False,
        request_timeout_ms=TIMEOUT_S * 1000,
        fetch_max_wait_ms=100,
    )


def read_through(bootstrap, tp, isolation, last):
    """Every record of `tp` from the beginning up to and including the one
    whose value is `last`, as (offset, value) pairs."""
    c = consumer(bootstrap, isolation)
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        out = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                for r in records:
                    out.append((r.offset, r.value.decode()))
                    if out[-1][1] == last:
                        return out
        raise AssertionError(f"{isolation}: no {last!r} within {TIMEOUT_S}s; read {out}")
    finally:
        c.close()


def read_to_end(bootstrap, topic, partitions, isolation):
    """Every value of `topic` up to the end offsets a consumer at
    `isolation` is given (the LSO for read_committed, the high watermark
    otherwise), sorted."""
    c = consumer(bootstrap, isolation)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + TIMEOUT_S
        while any(c.position(tp) < end[tp] for tp in tps):
            expect(time.monotonic() < deadline, f"not read to {end} within {TIMEOUT_S}s")
            for records in c.poll(timeout_ms=200).values():
                out.extend(r.value.decode() for r in records)
        return sorted(out)
    finally:
        c.close()


def end_offset(bootstrap, tp, isolation):
    c = consumer(bootstrap, isolation)
    try:
        return c.end_offsets([tp])[tp]
    finally:
        c.close()


def commit_and_abort_topic(bootstrap, admin):
    """One committed batch, one aborted batch, a committed end record."""
    tp = create_topic(admin, f"py-txn-vis-{uuid.uuid4().hex[:8]}")
    p = transactional(bootstrap, f"py-vis-{uuid.uuid4().hex[:8]}")
    try:
        committed_txn(p, tp, values("committed", 10))
        committed_txn(p, tp, values("aborted", 10), commit=False)
        committed_txn(p, tp, ["end"])
    finally:
        p.close(timeout=10)
    return tp


def check_read_committed(bootstrap, tp):
    read = read_through(bootstrap, tp, "read_committed", "end")
    got = [v for _, v in read]
    want = values("committed", 10) + ["end"]
    expect(got == want, f"read_committed read {got}, want {want}")
    return f"{len(got)} records, the committed batch and the end record, none aborted"


def check_read_uncommitted(bootstrap, tp):
    read = read_through(bootstrap, tp, "read_uncommitted", "end")
    got = [v for _, v in read]
    want = values("committed", 10) + values("aborted", 10) + ["end"]
    expect(got == want, f"read_uncommitted read {got}, want {want}")
    # Offsets 10 (COMMIT) and 21 (ABORT) are the markers.
    offsets = [o for o, _ in read]
    want_offsets = list(range(0, 10)) + list(range(11, 21)) + [22]
    expect(offsets == want_offsets, f"offsets {offsets}, want {want_offsets}")
    return f"{len(got)} records, both batches in log order, markers at offsets 10 and 21 skipped"


def check_lso(bootstrap, admin):
    tp = create_topic(admin, f"py-txn-lso-{uuid.uuid4().hex[:8]}")
    p = transactional(bootstrap, f"py-lso-{uuid.uuid4().hex[:8]}")
    try:
        committed_txn(p, tp, values("before", 3))
        # 3 records and a COMMIT marker.
        p.begin_transaction()
        send_all(p, tp, values("open", 5))
        held = end_offset(bootstrap, tp, "read_committed")
        hw = end_offset(bootstrap, tp, "read_uncommitted")
        expect(held == 4, f"read_committed end offset with a transaction open: {held}, want 4")
        expect(hw == 9, f"read_uncommitted end offset: {hw}, want 9")
        p.commit_transaction()
        after = end_offset(bootstrap, tp, "read_committed")
        expect(after == 10, f"read_committed end offset after the commit: {after}, want 10")
    finally:
        p.close(timeout=10)
    return f"end offset read_committed {held} / read_uncommitted {hw} while open, {after} after the commit"


def commit_once_fenced(producer):
    """Commits with a producer whose send was refused for its old epoch.

    kafka-python answers that refusal by bumping its epoch in the
    background (KIP-360); a commit during the bump is refused as an invalid
    state transition, so this retries until the bump has its answer. The
    answer must be PRODUCER_FENCED, which leaves the producer failing every
    transactional call with an error naming ProducerFencedError."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            producer.commit_transaction()
        except ProducerFencedError as exc:
            return f"raised {type(exc).__name__}"
        except KafkaError as exc:
            if "ProducerFencedError" in str(exc):
                return f"raised {type(exc).__name__}: {exc}"
            expect(
                "BUMPING_PRODUCER_EPOCH" in str(exc) and time.monotonic() < deadline,
                f"the fenced producer's commit raised {type(exc).__name__}: {exc}",
            )
            time.sleep(0.05)
        else:
            raise AssertionError("the fenced producer's commit succeeded")


def check_fenced(bootstrap, admin, at):
    tp = create_topic(admin, f"py-txn-fence-{at}-{uuid.uuid4().hex[:8]}")
    tid = f"py-fence-{uuid.uuid4().hex[:8]}"
    old = transactional(bootstrap, tid)
    new = None
    try:
        old.begin_transaction()
        send_all(old, tp, values("zombie", 4))
        # InitProducerId of the new instance bumps the epoch and aborts the
        # old one's open transaction before it returns.
        new = transactional(bootstrap, tid)
        if at == "send":
            try:
                send_all(old, tp, ["zombie-late"])
            except InvalidProducerEpochError:
                pass
            else:
                raise AssertionError("the fenced producer's send succeeded")
            fenced = f"InvalidProducerEpochError, then its commit {commit_once_fenced(old)}"
        else:
            try:
                old.commit_transaction()
            except ProducerFencedError as exc:
                fenced = type(exc).__name__
            else:
                raise AssertionError("the fenced producer's commit succeeded")
        committed_txn(new, tp, values("live", 3) + ["end"])
    finally:
        old.close(timeout=10)
        if new is not None:
            new.close(timeout=10)
    got = [v for _, v in read_through(bootstrap, tp, "read_committed", "end")]
    want = values("live", 3) + ["end"]
    expect(got == want, f"read_committed read {got}, want {want} (no zombie record)")
    raw = [v for _, v in read_through(bootstrap, tp, "read_uncommitted", "end")]
    expect(raw[:4] == values("zombie", 4), f"read_uncommitted read {raw}: the zombie batch was never written")
    expect("zombie-late" not in raw, f"the fenced send was written: {raw}")
    return f"old producer's {at} raised {fenced}; read_committed read only the new producer's records {got}"


def check_fenced_between(bootstrap, admin):
    tp = create_topic(admin, f"py-txn-fence-idle-{uuid.uuid4().hex[:8]}")
    tid = f"py-fence-idle-{uuid.uuid4().hex[:8]}"
    first = transactional(bootstrap, tid)
    second = None
    try:
        committed_txn(first, tp, ["first"])
        second = transactional(bootstrap, tid)
        fenced = None
        try:
            committed_txn(first, tp, ["zombie"])
        except Exception as exc:  # noqa: BLE001
            fenced = exc
        expect(
            isinstance(fenced, (ProducerFencedError, InvalidProducerEpochError))
            or "ProducerFenced" in repr(fenced)
            or "InvalidProducerEpoch" in repr(fenced),
            f"the idle producer was not fenced: {fenced!r}",
        )
        committed_txn(second, tp, ["second", "end"])
    finally:
        first.close(timeout=10)
        if second is not None:
            second.close(timeout=10)
    got = [v for _, v in read_through(bootstrap, tp, "read_committed", "end")]
    expect(got == ["first", "second", "end"], f"read_committed read {got}")
    return f"its next transaction raised {type(fenced).__name__}; read_committed read {got}"


def check_two_partitions(bootstrap, admin):
    topic = create_topic(admin, f"py-txn-two-{uuid.uuid4().hex[:8]}", partitions=2).topic
    p = transactional(bootstrap, f"py-two-{uuid.uuid4().hex[:8]}")
    try:
        # Keys spread each transaction over both partitions.
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
    got = read_to_end(bootstrap, topic, 2, "read_committed")
    expect(got == sorted(committed), f"read_committed: {got}")
    got = read_to_end(bootstrap, topic, 2, "read_uncommitted")
    expect(got == sorted(committed + [f"aborted-{i}" for i in range(3)]), f"read_uncommitted: {got}")
    return f"read_committed read the {len(committed)} committed records of both partitions"


def check_timeout(bootstrap, admin):
    tp = create_topic(admin, f"py-txn-slow-{uuid.uuid4().hex[:8]}")
    p = transactional(bootstrap, f"py-slow-{uuid.uuid4().hex[:8]}", transaction_timeout_ms=1000)
    try:
        p.begin_transaction()
        send_all(p, tp, ["left-open"])
        # The coordinator aborts it: the read_committed end offset (the LSO)
        # reaches the high watermark, past the ABORT marker.
        deadline = time.monotonic() + TIMEOUT_S
        while end_offset(bootstrap, tp, "read_committed") < end_offset(bootstrap, tp, "read_uncommitted"):
            expect(time.monotonic() < deadline, f"the open transaction was not aborted within {TIMEOUT_S}s")
            time.sleep(0.1)
        failed = None
        try:
            p.commit_transaction()
        except Exception as exc:  # noqa: BLE001
            failed = exc
        expect(failed is not None, "committing an aborted transaction succeeded")
    finally:
        p.close(timeout=10)
    got = read_to_end(bootstrap, tp.topic, 1, "read_committed")
    expect("left-open" not in got, f"read_committed read the aborted record: {got}")
    return f"aborted by the coordinator; the commit raised {type(failed).__name__}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    args = ap.parse_args()
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        tp = commit_and_abort_topic(args.bootstrap, admin)
    except Exception as exc:  # noqa: BLE001
        print(f"FAIL transactions: {type(exc).__name__}: {exc}", flush=True)
        traceback.print_exc(file=sys.stderr)
        return 1
    run_check("read_committed", check_read_committed, args.bootstrap, tp)
    run_check("read_uncommitted", check_read_uncommitted, args.bootstrap, tp)
    run_check("lso", check_lso, args.bootstrap, admin)
    run_check("fenced at commit", check_fenced, args.bootstrap, admin, "commit")
    run_check("fenced at send", check_fenced, args.bootstrap, admin, "send")
    run_check("fenced between", check_fenced_between, args.bootstrap, admin)
    run_check("two partitions", check_two_partitions, args.bootstrap, admin)
    run_check("timeout", check_timeout, args.bootstrap, admin)
    admin.close()
    return 0 if RESULTS and all(ok for _, ok in RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
