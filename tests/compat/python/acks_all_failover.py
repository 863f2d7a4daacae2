#!/usr/bin/env python3
"""kafka-python producing with acks=all (idempotent) to partition 0 of a
topic while the test kills the partition's leader: the test reads the
acknowledged values back from the new leader.

Usage: acks_all_failover.py --bootstrap H:P,H:P,H:P --topic T --records N
         --prefix P

Sends the values `<P>-0` .. `<P>-<N-1>` in order, keeping a window of
sends in flight, and prints one line per record as its send settles:
`ACK <value> <offset>` or `ERR <value> <error>`, then
`DONE acked=<a> failed=<f> idempotent=<true|false>`. Exits non-zero only
when the producer itself cannot run.
"""

import argparse
import collections
import sys

from kafka import KafkaProducer

# Sends in flight while the next one is queued.
WINDOW = 10
# How long one record may take, failover included (the test's own bound is
# shorter).
DELIVERY_TIMEOUT_MS = 60_000


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--prefix", required=True)
    args = p.parse_args()

    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap.split(","),
        client_id="weir-compat-failover",
        acks="all",
        enable_idempotence=True,
        retries=sys.maxsize,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        request_timeout_ms=5_000,
        linger_ms=5,
        max_in_flight_requests_per_connection=5,
    )
    counts = {"acked": 0, "failed": 0}

    def settle(value, future):
        try:
            md = future.get(timeout=DELIVERY_TIMEOUT_MS / 1000 + 10)
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            counts["failed"] += 1
            print(f"ERR {value} {type(exc).__name__}: {exc}", flush=True)
            return
        counts["acked"] += 1
        print(f"ACK {value} {md.offset}", flush=True)

    pending = collections.deque()
    for i in range(args.records):
        value = f"{args.prefix}-{i}"
        future = producer.send(args.topic, value=value.encode(), partition=0)
        pending.append((value, future))
        if len(pending) >= WINDOW:
            settle(*pending.popleft())
    while pending:
        settle(*pending.popleft())
    idempotent = bool(producer.config.get("enable_idempotence"))
    producer.close(timeout=10)
    print(
        f"DONE acked={counts['acked']} failed={counts['failed']} "
        f"idempotent={'true' if idempotent else 'false'}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
