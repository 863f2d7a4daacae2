#!/usr/bin/env python3
"""A kafka-python group member (classic protocol) for the compat tests.

Prints one line per event on stdout, in the format of the
`rdkafka-group-member` helper (crates/compat-tests/src/bin):

    OWN <generation> <p,p,...>   partitions assigned (empty when revoked)
    REC <partition> <offset> <value>
    COMMIT <partition> <next offset>   the commit was acknowledged
    COMMITFAIL <reason>
    CLOSED                        after a clean close (LeaveGroup)
    ERROR <text>

It reads records, waits --record-delay-ms, commits each record's next
offset synchronously, and closes cleanly when its stdin closes.
"""

import argparse
import sys
import threading
import time

from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def generation(consumer):
    gen = getattr(getattr(consumer, "_coordinator", None), "_generation", None)
    return getattr(gen, "generation_id", -1)


class Listener(ConsumerRebalanceListener):
    def __init__(self):
        self.consumer = None

    def on_partitions_revoked(self, revoked):
        say("OWN %d " % generation(self.consumer))

    def on_partitions_assigned(self, assigned):
        parts = sorted(tp.partition for tp in assigned)
        say("OWN %d %s" % (generation(self.consumer), ",".join(str(p) for p in parts)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--record-delay-ms", type=int, default=0)
    ap.add_argument("--max-secs", type=int, default=240)
    args = ap.parse_args()

    stop = threading.Event()

    def watch_stdin():
        for _ in sys.stdin:
            pass
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="kafka-python-member",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
        max_poll_records=10,
    )
    listener = Listener()
    listener.consumer = consumer
    consumer.subscribe([args.topic], listener=listener)
    deadline = time.time() + args.max_secs
    try:
        while not stop.is_set() and time.time() < deadline:
            batches = consumer.poll(timeout_ms=100)
            for tp, records in batches.items():
                for r in records:
                    value = r.value.decode("utf-8", "replace") if r.value else ""
                    say("REC %d %d %s" % (tp.partition, r.offset, value))
                    if args.record_delay_ms:
                        time.sleep(args.record_delay_ms / 1000.0)
                    try:
                        consumer.commit({TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(r.offset + 1, "", -1)})
                        say("COMMIT %d %d" % (tp.partition, r.offset + 1))
                    except Exception as e:  # a failed commit is reported, not fatal
                        say("COMMITFAIL %s" % type(e).__name__)
        consumer.close()
        say("CLOSED")
    except Exception as e:
        say("ERROR %s: %s" % (type(e).__name__, e))
        raise


if __name__ == "__main__":
    main()
