#!/usr/bin/env bash
# Raw page-cache limits of this machine, to compare with `cargo bench -p
# weir-storage`: dd writes 512 MiB into the page cache (no fsync) in 16 KiB
# and 1 MiB blocks, then reads the cached file back.
set -euo pipefail
f=$(mktemp "${TMPDIR:-/tmp}/weir-raw.XXXXXX")
trap 'rm -f "$f"' EXIT
for bs in 16K 1M; do
  count=$(( 512 * 1024 * 1024 / $(numfmt --from=iec "$bs") ))
  echo "page-cache write, bs=$bs:"
  dd if=/dev/zero of="$f" bs="$bs" count="$count" conv=notrunc 2>&1 | tail -1
done
cat "$f" > /dev/null
echo "cached read, bs=1M:"
dd if="$f" of=/dev/null bs=1M 2>&1 | tail -1
