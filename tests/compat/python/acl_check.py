#!/usr/bin/env python3
"""kafka-python against a broker with Kafka's StandardAuthorizer on a
SASL_PLAINTEXT listener (PLAIN users admin, a super user, and alice):
alice's produce to a topic she may DESCRIBE but not WRITE raises
TopicAuthorizationFailedError; once the super user grants WRITE with the
admin client's create_acls, it is appended; a consumer group alice may not
READ raises GroupAuthorizationFailedError.

Usage: acl_check.py --bootstrap H:P

Every check prints one line, `PASS <name>` or `FAIL <name>: <reason>`.
"""

import argparse
import sys
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    NewTopic,
    ResourcePattern,
    ResourceType,
)
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError


def check(name, fn):
    started = time.monotonic()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - any failure is a FAIL line
        print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
        return False
    print(f"PASS {name} ({time.monotonic() - started:.1f}s)", flush=True)
    return True


def sasl(user):
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": f"{user}-secret",
    }


def allow(admin, rt, name, op):
    result = admin.create_acls(
        [
            ACL(
                principal="User:alice",
                host="*",
                operation=op,
                permission_type=ACLPermissionType.ALLOW,
                resource_pattern=ResourcePattern(rt, name),
            )
        ]
    )
    if result["failed"]:
        raise AssertionError(f"create_acls failed: {result['failed']}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    args = p.parse_args()
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, **sasl("admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])

    def producer():
        # not idempotent: an idempotent producer without any WRITE is
        # refused earlier, at InitProducerId (CLUSTER_AUTHORIZATION_FAILED)
        return KafkaProducer(
            bootstrap_servers=args.bootstrap,
            max_block_ms=10000,
            enable_idempotence=False,
            retries=0,
            **sasl("alice"),
        )

    def refused_write():
        # DESCRIBE, so that the refusal is the produce's, not Metadata's
        allow(admin, ResourceType.TOPIC, topic, ACLOperation.DESCRIBE)
        p = producer()
        try:
            p.send(topic, b"refused").get(timeout=10)
        except TopicAuthorizationFailedError:
            return
        finally:
            p.close(timeout=1)
        raise AssertionError("alice produced without WRITE")

    def granted_write():
        allow(admin, ResourceType.TOPIC, topic, ACLOperation.WRITE)
        p = producer()
        try:
            meta = p.send(topic, b"granted").get(timeout=10)
        finally:
            p.close(timeout=1)
        if meta.offset < 0:
            raise AssertionError(f"no offset: {meta}")

    def refused_group():
        # READ on the topic, none on the group
        allow(admin, ResourceType.TOPIC, topic, ACLOperation.READ)
        c = KafkaConsumer(
            topic,
            bootstrap_servers=args.bootstrap,
            group_id="acl-group",
            auto_offset_reset="earliest",
            **sasl("alice"),
        )
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                c.poll(timeout_ms=500)
        except GroupAuthorizationFailedError:
            return
        finally:
            c.close()
        raise AssertionError("alice consumed in a group without READ on it")

    ok = all(
        [
            check("produce without WRITE: TopicAuthorizationFailedError", refused_write),
            check("produce after create_acls(WRITE)", granted_write),
            check("group without READ: GroupAuthorizationFailedError", refused_group),
        ]
    )
    admin.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
