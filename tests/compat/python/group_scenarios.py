#!/usr/bin/env python3
"""Consumer-group scenarios for kafka-python against a weir broker.

Every check prints one line, `PASS <name>` or `FAIL <name>: <reason>`, and
the script exits non-zero if any check failed. Every wait is bounded.

Scenarios (--scenario):
  members   three members join one by one on a 6-partition topic, one leaves
            with close(), one (a child process) is killed with SIGKILL; every
            record is consumed, committed offsets never move backwards, and a
            restarted consumer resumes exactly at the committed offset
  reset     auto_offset_reset earliest / latest with no committed offset
  static    a static member (group_instance_id) restarts within its session
            timeout without a rebalance
  commit    produce, consume and commit a known set of offsets for --group on
            --topic, print `COMMITTED <partition> <offset>` lines
  verify    check that --group's committed offsets on --topic are the ones
            given with --expect "p:o,p:o,..."
  child     (internal) a group member that prints what it reads until killed
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

RESULTS = []
SESSION_MS = 6000


def run_check(name, fn, *args):
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


def create_topic(admin, topic, partitions):
    admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
    deadline = time.monotonic() + 15
    while True:
        info = {t["name"]: t for t in admin.describe_topics([topic])}.get(topic)
        if info and info.get("error_code", 0) == 0 and len(info.get("partitions") or []) == partitions:
            return
        expect(time.monotonic() < deadline, f"topic {topic} not visible with {partitions} partitions: {info}")
        time.sleep(0.1)


def produce(bootstrap, topic, values, partition=None):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=30000, max_block_ms=30000)
    try:
        futures = [
            producer.send(topic, key=v.encode(), value=v.encode(), partition=partition) for v in values
        ]
        producer.flush(timeout=60)
        return [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)


def consumer(bootstrap, topic, group, **extra):
    config = dict(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=30000,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=1000,
    )
    config.update(extra)
    return KafkaConsumer(topic, **config)


def committed_offsets(admin, group, topic):
    offsets = admin.list_group_offsets({group: None})[group]
    return {tp.partition: m.offset for tp, m in offsets.items() if tp.topic == topic and m.offset >= 0}


class Member:
    """An in-process group member that commits after every batch it reads.

    Each member polls in its own thread, as an application would. Polling
    several consumers in turn from one thread makes kafka-python lose group
    joins: `poll(timeout_ms=...)` returns while its JoinGroup/SyncGroup is
    still in flight, and if that exchange completes while the thread is
    polling another consumer, the next poll discards the finished result and
    sends a new JoinGroup. For the group leader that starts yet another
    rebalance (as it would on any broker), so the group can keep
    rebalancing instead of settling.
    """

    def __init__(self, name, bootstrap, topic, group, seen):
        self.name = name
        self.seen = seen
        self.c = consumer(bootstrap, topic, group)
        self.error = None
        self._assigned = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self._thread.start()

    def _run(self):
        try:
            while not self._stop.is_set():
                batch = self.c.poll(timeout_ms=200, max_records=50)
                if batch:
                    for recs in batch.values():
                        for r in recs:
                            self.seen.add(r.value.decode())
                    self.c.commit()
                self._assigned = frozenset(tp.partition for tp in self.c.assignment())
        except Exception as exc:  # noqa: BLE001 - reported by check()
            self.error = exc
            traceback.print_exc(file=sys.stderr)

    def check(self):
        expect(self.error is None, f"member {self.name} failed: {type(self.error).__name__}: {self.error}")
        expect(self._thread.is_alive(), f"member {self.name} stopped polling")

    def assigned(self):
        return set(self._assigned)

    def close(self):
        """Stops polling, then closes the consumer (leaving the group)."""
        self._stop.set()
        self._thread.join(timeout=60)
        self.c.close()


class Poller:
    """Polls one consumer in its own thread (see `Member` for why) and
    publishes its assignment after every poll."""

    def __init__(self, c):
        self.c = c
        self.error = None
        self.assigned = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            while not self._stop.is_set():
                self.c.poll(timeout_ms=100)
                self.assigned = frozenset(tp.partition for tp in self.c.assignment())
        except Exception as exc:  # noqa: BLE001 - reported by poll_together()
            self.error = exc
            traceback.print_exc(file=sys.stderr)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=60)


def poll_together(consumers, until, deadline, what):
    """Polls every consumer in its own thread until `until(assignments)`
    (one set of partitions per consumer) holds."""
    pollers = [Poller(c) for c in consumers]
    try:
        while True:
            for p in pollers:
                expect(p.error is None, f"poll failed: {type(p.error).__name__}: {p.error}")
            if until([p.assigned for p in pollers]):
                return
            expect(time.monotonic() < deadline, what)
            time.sleep(0.1)
    finally:
        for p in pollers:
            p.stop()


def scenario_members(bootstrap, admin):
    topic = f"pyg-members-{uuid.uuid4().hex[:8]}"
    group = f"pyg-members-{uuid.uuid4().hex[:8]}"
    run_check("members: create 6-partition topic", create_topic, admin, topic, 6)
    seen = set()
    child_seen = set()
    produced = []
    history = {}  # partition -> last committed offset observed
    regressions = []

    def watch_commits():
        for p, o in committed_offsets(admin, group, topic).items():
            if o < history.get(p, -1):
                regressions.append(f"partition {p}: {history[p]} -> {o}")
            history[p] = max(o, history.get(p, -1))

    def produce_batch(n):
        vals = [f"r{len(produced) + i}" for i in range(n)]
        produce(bootstrap, topic, vals)
        produced.extend(vals)

    def pump(members, until, what, limit_s=120):
        # The members poll in their own threads; this waits for `until`
        # while watching the committed offsets.
        deadline = time.monotonic() + limit_s
        while True:
            for m in members:
                m.check()
            watch_commits()
            if until():
                return
            expect(time.monotonic() < deadline, f"timed out waiting for {what}")
            time.sleep(0.2)

    def all_seen():
        return set(produced) <= (seen | child_seen)

    members = []
    child = None
    try:
        def first_joins():
            produce_batch(120)
            members.append(Member("a", bootstrap, topic, group, seen))
            pump(members, lambda: members[0].assigned() == set(range(6)) and all_seen(), "member a to read 120")

        def second_joins():
            members.append(Member("b", bootstrap, topic, group, seen))
            produce_batch(120)

            def split():
                a, b = members[0].assigned(), members[1].assigned()
                return a and b and not (a & b) and (a | b) == set(range(6))

            pump(members, lambda: split() and all_seen(), "a and b to share 6 partitions and read 240")

        child_assigned = []

        def third_joins():
            nonlocal child
            child = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--bootstrap", bootstrap,
                 "--scenario", "child", "--topic", topic, "--group", group],
                stdout=subprocess.PIPE, text=True,
            )

            def reader():
                for line in child.stdout:
                    parts = line.split()
                    if parts and parts[0] == "REC":
                        child_seen.add(parts[1])
                    elif parts and parts[0] == "ASSIGNED":
                        child_assigned.append({int(p) for p in parts[1:]})

            threading.Thread(target=reader, daemon=True).start()
            produce_batch(120)

            def split3():
                if not child_assigned or not child_assigned[-1]:
                    return False
                a, b, c = members[0].assigned(), members[1].assigned(), child_assigned[-1]
                return a and b and not (a & b) and not (a & c) and not (b & c) and (a | b | c) == set(range(6))

            pump(members, lambda: split3() and all_seen(), "three members to share 6 partitions and read 360")

        def third_killed():
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)
            produce_batch(120)

            def rebalanced():
                a, b = members[0].assigned(), members[1].assigned()
                return a and b and not (a & b) and (a | b) == set(range(6))

            pump(members, lambda: rebalanced() and all_seen(), "a and b to take over after the session timeout")

        def first_leaves():
            members.pop(0).close()
            produce_batch(120)
            pump(members, lambda: members[0].assigned() == set(range(6)) and all_seen(), "b to own all partitions")

        ok = run_check("members: first member joins and reads", first_joins)
        ok = ok and run_check("members: second member joins, partitions split", second_joins)
        ok = ok and run_check("members: third member (separate process) joins", third_joins)
        ok = ok and run_check("members: SIGKILLed member's partitions reassigned after session timeout", third_killed)
        ok = ok and run_check("members: member leaving with close() hands over its partitions", first_leaves)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        for m in members:
            m.close()

    if not ok:
        return

    def all_consumed_and_committed():
        expect(set(produced) <= (seen | child_seen), f"{len(set(produced) - seen - child_seen)} records never consumed")
        watch_commits()
        expect(not regressions, f"committed offsets moved backwards: {regressions}")
        total = sum(committed_offsets(admin, group, topic).values())
        expect(total == len(produced), f"committed offsets sum to {total}, produced {len(produced)}")

    run_check("members: every record consumed, commits never move backwards", all_consumed_and_committed)

    def resume_exactly():
        # 20 more records on partition 0; one consumer processes one of them
        # and commits offset+1, the next one must start right after it.
        produce(bootstrap, topic, [f"p0-{i}" for i in range(20)], partition=0)
        tp = TopicPartition(topic, 0)
        before = committed_offsets(admin, group, topic).get(0)
        d = consumer(bootstrap, topic, group)
        try:
            got = None
            deadline = time.monotonic() + 60
            while got is None:
                expect(time.monotonic() < deadline, "first consumer read nothing on partition 0")
                for r in d.poll(timeout_ms=200, max_records=1).get(tp, []):
                    got = got or r
            expect(got.offset == before, f"first record at offset {got.offset}, committed offset was {before}")
            d.commit({tp: OffsetAndMetadata(got.offset + 1, "", -1)})
        finally:
            d.close()
        e = consumer(bootstrap, topic, group)
        try:
            first = None
            deadline = time.monotonic() + 60
            while first is None:
                expect(time.monotonic() < deadline, "restarted consumer read nothing on partition 0")
                recs = e.poll(timeout_ms=200, max_records=5).get(tp, [])
                if recs:
                    first = recs[0]
            expect(first.offset == got.offset + 1,
                   f"restarted consumer began at offset {first.offset}, expected {got.offset + 1}")
        finally:
            e.close()

    run_check("members: a restarted consumer resumes exactly at the committed offset", resume_exactly)


def scenario_child(args):
    c = consumer(args.bootstrap, args.topic, args.group)
    last = None
    while True:  # runs until killed
        batch = c.poll(timeout_ms=200, max_records=50)
        for recs in batch.values():
            for r in recs:
                print(f"REC {r.value.decode()}", flush=True)
        if batch:
            c.commit()
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            print("ASSIGNED " + " ".join(map(str, now)), flush=True)
            last = now


def scenario_reset(bootstrap, admin):
    topic = f"pyg-reset-{uuid.uuid4().hex[:8]}"
    if not run_check("reset: create topic", create_topic, admin, topic, 1):
        return
    produce(bootstrap, topic, [f"old{i}" for i in range(5)])
    tp = TopicPartition(topic, 0)

    def earliest():
        c = consumer(bootstrap, topic, f"pyg-earliest-{uuid.uuid4().hex[:8]}", auto_offset_reset="earliest")
        try:
            out = []
            deadline = time.monotonic() + 60
            while len(out) < 5:
                expect(time.monotonic() < deadline, f"read {len(out)} of 5 records")
                for recs in c.poll(timeout_ms=200).values():
                    out.extend(recs)
            expect([r.offset for r in out] == list(range(5)), f"offsets {[r.offset for r in out]}")
        finally:
            c.close()

    def latest():
        c = consumer(bootstrap, topic, f"pyg-latest-{uuid.uuid4().hex[:8]}", auto_offset_reset="latest")
        try:
            deadline = time.monotonic() + 60
            while tp not in c.assignment():
                expect(time.monotonic() < deadline, "no assignment")
                expect(not c.poll(timeout_ms=200), "latest consumer read an old record")
            expect(c.position(tp) == 5, f"position {c.position(tp)}, expected the end offset 5")
            produce(bootstrap, topic, [f"new{i}" for i in range(3)])
            out = []
            while len(out) < 3:
                expect(time.monotonic() < deadline, f"read {len(out)} of 3 new records")
                for recs in c.poll(timeout_ms=200).values():
                    out.extend(recs)
            expect([(r.offset, r.value) for r in out] == [(5 + i, f"new{i}".encode()) for i in range(3)],
                   f"read {[(r.offset, r.value) for r in out]}")
        finally:
            c.close()

    run_check("reset: earliest with no committed offset starts at 0", earliest)
    run_check("reset: latest with no committed offset starts at the end", latest)


def scenario_static(bootstrap, admin):
    topic = f"pyg-static-{uuid.uuid4().hex[:8]}"
    group = f"pyg-static-{uuid.uuid4().hex[:8]}"
    if not run_check("static: create topic", create_topic, admin, topic, 4):
        return
    events = []

    from kafka import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            events.append(("revoked", sorted(tp.partition for tp in revoked)))

        def on_partitions_assigned(self, assigned):
            events.append(("assigned", sorted(tp.partition for tp in assigned)))

    def static_member(instance):
        return KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, group_instance_id=instance,
            auto_offset_reset="earliest", enable_auto_commit=False, request_timeout_ms=30000,
            session_timeout_ms=20000, heartbeat_interval_ms=1000,
        )

    def check():
        other = static_member("other")
        other.subscribe([topic], listener=Listener())
        first = static_member("restarting")
        first.subscribe([topic])
        restarted = None
        try:
            deadline = time.monotonic() + 120
            poll_together([first, other], lambda a: a[0] and a[1] and len(a[0]) + len(a[1]) == 4,
                          deadline, "two static members did not split the partitions")
            before = set(first.assignment())
            settled = len(events)
            first.close()  # a static member does not leave the group
            first = None
            restarted = static_member("restarting")
            restarted.subscribe([topic])
            poll_together([restarted, other], lambda a: a[0], deadline,
                          "restarted static member got no assignment")
            # give a rebalance, if any, the chance to show
            window_end = time.monotonic() + 4
            poll_together([restarted, other], lambda a: time.monotonic() >= window_end, deadline,
                          "polling after the restart")
            expect(set(restarted.assignment()) == before,
                   f"restarted member got {restarted.assignment()}, had {before}")
            expect(events[settled:] == [], f"the other member saw a rebalance: {events[settled:]}")
        finally:
            for c in (first, restarted, other):
                if c is not None:
                    c.close()

    run_check("static: member restarts within session timeout without a rebalance", check)


def scenario_commit(args, admin):
    create_topic(admin, args.topic, 3)
    produce(args.bootstrap, args.topic, [f"c{i}" for i in range(30)], partition=None)
    c = consumer(args.bootstrap, args.topic, args.group)
    try:
        deadline = time.monotonic() + 60
        while len(c.assignment()) < 3:
            expect(time.monotonic() < deadline, "no assignment")
            c.poll(timeout_ms=200, max_records=1)
        # commit distinct, known offsets per partition: end offset - 1 - p
        ends = c.end_offsets(list(c.assignment()))
        wanted = {tp: max(ends[tp] - 1 - tp.partition, 0) for tp in ends}
        c.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in wanted.items()})
        for tp, o in sorted(wanted.items()):
            print(f"COMMITTED {tp.partition} {o}", flush=True)
    finally:
        c.close()


def scenario_verify(args, admin):
    want = {}
    for item in filter(None, args.expect.split(",")):
        p, o = item.split(":")
        want[int(p)] = int(o)
    got = committed_offsets(admin, args.group, args.topic)
    expect(got == want, f"committed offsets {got}, expected {want}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--scenario", required=True,
                    choices=["members", "reset", "static", "commit", "verify", "child"])
    ap.add_argument("--topic")
    ap.add_argument("--group")
    ap.add_argument("--expect", default="")
    args = ap.parse_args()
    if args.scenario == "child":
        scenario_child(args)
        return 0
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=30000)
    try:
        if args.scenario == "members":
            scenario_members(args.bootstrap, admin)
        elif args.scenario == "reset":
            scenario_reset(args.bootstrap, admin)
        elif args.scenario == "static":
            scenario_static(args.bootstrap, admin)
        elif args.scenario == "commit":
            run_check("commit: known offsets committed", scenario_commit, args, admin)
        elif args.scenario == "verify":
            run_check("verify: committed offsets kept", scenario_verify, args, admin)
    finally:
        admin.close()
    passed = sum(1 for _, ok in RESULTS if ok)
    failed = len(RESULTS) - passed
    print(f"group scenarios summary: {passed} checks passed, {failed} checks failed", flush=True)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
