#!/usr/bin/env python3
"""kafka-python over a SASL_PLAINTEXT listener (or, with --cafile, a
SASL_SSL one whose certificate is verified against that CA): produce and
consume as an authenticated user, or (with --refused) be refused with an
authentication error for a wrong password.

Usage: sasl_check.py --bootstrap H:P --mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512
         --username U --password P [--cafile CA.pem] [--refused]

Every check prints one line, `PASS <name>` or `FAIL <name>: <reason>`.
"""

import argparse
import logging
import sys
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

RECORDS = 200


def check(name, fn):
    started = time.monotonic()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - any failure is a FAIL line
        print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
        return False
    print(f"PASS {name} ({time.monotonic() - started:.1f}s)", flush=True)
    return True


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--mechanism", required=True)
    p.add_argument("--username", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--cafile")
    p.add_argument("--refused", action="store_true")
    args = p.parse_args()
    sasl = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": args.mechanism,
        "sasl_plain_username": args.username,
        "sasl_plain_password": args.password,
    }
    if args.cafile:
        sasl["security_protocol"] = "SASL_SSL"
        sasl["ssl_cafile"] = args.cafile
        sasl["ssl_check_hostname"] = True

    if args.refused:

        def refused():
            # kafka-python reports the bootstrap failure; the broker's
            # authentication error is in its log
            seen = []

            class Keep(logging.Handler):
                def emit(self, record):
                    seen.append(record.getMessage())

            logger = logging.getLogger("kafka")
            logger.setLevel(logging.DEBUG)
            logger.addHandler(Keep())
            try:
                admin = KafkaAdminClient(
                    bootstrap_servers=args.bootstrap,
                    request_timeout_ms=5000,
                    bootstrap_timeout_ms=5000,
                    **sasl,
                )
            except Exception:  # noqa: BLE001 - checked through the log below
                expect(
                    any(
                        "SaslAuthenticationFailedError" in m
                        and "Invalid username or password" in m
                        for m in seen
                    ),
                    "no SASL authentication error from the broker in the client's log: "
                    + " | ".join(m for m in seen if "asl" in m)[:2000],
                )
                return
            admin.close()
            raise AssertionError("the broker served a client with a wrong password")

        return 0 if check(f"{args.mechanism} refused with a wrong password", refused) else 1

    topic = f"sasl-py-{uuid.uuid4().hex[:8]}"
    values = [f"py-{i}".encode() for i in range(RECORDS)]

    def produce():
        admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, **sasl)
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all", **sasl)
        for v in values:
            producer.send(topic, value=v, partition=0)
        producer.flush(30)
        producer.close(10)

    def consume():
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=args.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=20_000,
            **sasl,
        )
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == len(values):
                break
        consumer.close()
        expect(got == values, f"consumed {len(got)} records, not the {len(values)} produced in order")

    ok = check(f"produce with {args.mechanism}", produce)
    ok = check(f"consume with {args.mechanism}", consume) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
