#!/usr/bin/env python3
"""kafka-python over an SSL listener: produce and consume with
security_protocol='SSL', verifying the broker's certificate against the
test CA (and presenting a client certificate when given).

Usage: tls_check.py --bootstrap H:P --cafile CA.pem [--certfile C.pem
         --keyfile K.pem] [--refused]

Every check prints one line, `PASS <name>` or `FAIL <name>: <reason>`.
With --refused the one check is that the broker does not serve this
client (no client certificate where one is required).
"""

import argparse
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
    p.add_argument("--cafile", required=True)
    p.add_argument("--certfile")
    p.add_argument("--keyfile")
    p.add_argument("--refused", action="store_true")
    args = p.parse_args()
    ssl = {
        "security_protocol": "SSL",
        "ssl_cafile": args.cafile,
        "ssl_check_hostname": True,
    }
    if args.certfile:
        ssl["ssl_certfile"] = args.certfile
        ssl["ssl_keyfile"] = args.keyfile

    if args.refused:

        def refused():
            try:
                admin = KafkaAdminClient(
                    bootstrap_servers=args.bootstrap,
                    request_timeout_ms=5000,
                    api_version_auto_timeout_ms=5000,
                    **ssl,
                )
            except Exception:  # noqa: BLE001 - any failure to connect is a refusal
                return
            try:
                admin.list_topics()
            except Exception:  # noqa: BLE001 - any failure to connect is a refusal
                return
            finally:
                admin.close()
            raise AssertionError("the broker served a client without a certificate")

        return 0 if check("refused without a client certificate", refused) else 1

    topic = f"tls-py-{uuid.uuid4().hex[:8]}"
    values = [f"py-{i}".encode() for i in range(RECORDS)]

    def produce():
        admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, **ssl)
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all", **ssl)
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
            **ssl,
        )
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == len(values):
                break
        consumer.close()
        expect(got == values, f"consumed {len(got)} records, not the {len(values)} produced in order")

    ok = check("produce over SSL", produce)
    ok = check("consume over SSL", consume) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
