#!/usr/bin/env python3
"""Per-record produce errors as kafka-python sees them (one PASS/FAIL line
per check): 100 records in one batch to a compacted topic, 10 without a
key. The broker names the 10 in the Produce response's record_errors, so
kafka-python fails exactly those with InvalidRecordError and the 90 others
with a plain KafkaError ("part of a batch which had one more more invalid
records"); resent, the 90 are stored and read back in order.
"""

import argparse
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import InvalidRecordError, KafkaError


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)
    return ok


def outcomes(futures, timeout):
    out = []
    for f in futures:
        try:
            out.append(f.get(timeout=timeout).offset)
        except KafkaError as exc:
            out.append(exc)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    args = ap.parse_args()
    topic = "py-record-errors"
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=30000)
    admin.create_topics(
        [NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})]
    )
    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap,
        linger_ms=1000,
        batch_size=1 << 20,
        retries=0,
        enable_idempotence=False,
    )
    keyless = [i for i in range(100) if i % 10 == 3]
    others = [i for i in range(100) if i % 10 != 3]
    values = [f"value-{i}".encode() for i in range(100)]
    futures = [
        producer.send(
            topic,
            key=None if i in keyless else f"key-{i}".encode(),
            value=values[i],
            partition=0,
        )
        for i in range(100)
    ]
    producer.flush()
    got = outcomes(futures, 30)
    invalid = [i for i, o in enumerate(got) if isinstance(o, InvalidRecordError)]
    other = [
        i
        for i, o in enumerate(got)
        if isinstance(o, KafkaError) and not isinstance(o, InvalidRecordError)
        and "invalid records" in str(o)
    ]
    ok = check("keyless records fail alone with InvalidRecordError", invalid == keyless, f"{got}")
    ok &= check("the other 90 fail as part of a bad batch", other == others, f"{got}")

    futures = [
        producer.send(topic, key=f"key-{i}".encode(), value=values[i], partition=0)
        for i in others
    ]
    producer.flush()
    got = outcomes(futures, 30)
    ok &= check("the 90 resent are stored at offsets 0..89", got == list(range(90)), f"{got}")

    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    read = []
    deadline = time.monotonic() + 30
    while len(read) < 90 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            read.extend(r.value for r in records)
    ok &= check("the 90 read back in order", read == [values[i] for i in others], f"{read}")
    consumer.close()
    producer.close()
    admin.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
