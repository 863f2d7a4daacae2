"""Independent reader for weir's on-disk format, using kafka-python's record
batch parser. Usage: kafka_python_check.py PARTITION_DIR

Prints one line per record: "R <offset> <timestamp> <key hex or -> <value hex>",
and "I <file> <entries>" per checked index. Exits non-zero on any mismatch.
"""
import os
import struct
import sys

from kafka.record import MemoryRecords


def fail(msg):
    print("ERROR " + msg)
    sys.exit(1)


def batches(path):
    data = open(path, "rb").read()
    pos = 0
    out = []
    mr = MemoryRecords(data)
    while True:
        b = mr.next_batch()
        if b is None:
            break
        if not b.validate_crc():
            fail("bad crc in %s at %d" % (path, pos))
        size = struct.unpack(">i", data[pos + 8:pos + 12])[0] + 12
        out.append((pos, b))
        pos += size
    if pos != len(data):
        fail("%s: %d trailing bytes" % (path, len(data) - pos))
    return out


def main(d):
    for name in sorted(os.listdir(d)):
        if not name.endswith(".log"):
            continue
        base = int(name[:20])
        log = os.path.join(d, name)
        bs = batches(log)
        last_at = {}
        for pos, b in bs:
            last = b.base_offset + b.last_offset_delta
            last_at[pos] = last
            for r in b:
                key = r.key.hex() if r.key is not None else "-"
                value = r.value.hex() if r.value is not None else "-"
                print("R %d %d %s %s" % (r.offset, r.timestamp, key, value))
        idx = open(os.path.join(d, name[:20] + ".index"), "rb").read()
        n = 0
        for i in range(0, len(idx) - len(idx) % 8, 8):
            rel, pos = struct.unpack(">ii", idx[i:i + 8])
            if rel == 0 and pos == 0 and i > 0:
                break
            if last_at.get(pos) != base + rel:
                fail("%s entry %d: offset %d position %d is not a batch start with that last offset" % (name, i // 8, base + rel, pos))
            n += 1
        print("I %s %d" % (name[:20] + ".index", n))
        tidx = open(os.path.join(d, name[:20] + ".timeindex"), "rb").read()
        lasts = set(last_at.values())
        n = 0
        for i in range(0, len(tidx) - len(tidx) % 12, 12):
            ts, rel = struct.unpack(">qi", tidx[i:i + 12])
            if ts == 0 and rel == 0 and i > 0:
                break
            if base + rel not in lasts:
                fail("%s entry %d: offset %d is not a batch's last offset" % (name, i // 12, base + rel))
            n += 1
        print("I %s %d" % (name[:20] + ".timeindex", n))


if __name__ == "__main__":
    main(sys.argv[1])
