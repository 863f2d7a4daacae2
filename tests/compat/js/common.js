// Shared by the compat scripts: named checks that record PASS/FAIL, and
// Kafka's Java murmur2 partitioner, written out here so the expected
// partition of a key does not come from the client under test.

const results = []

async function check(name, fn) {
  const started = Date.now()
  try {
    const v = await fn()
    console.log(`PASS ${name} (${((Date.now() - started) / 1000).toFixed(1)}s)`)
    results.push([name, true])
    return v === undefined ? true : v
  } catch (e) {
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack.split('\n').slice(0, 4).join(' | ') : e}`)
    results.push([name, false])
    return null
  }
}

function expect(cond, msg) {
  if (!cond) throw new Error(msg)
}

// Kafka's Java murmur2 (Utils.murmur2).
function murmur2(buf) {
  const seed = 0x9747b28c
  const m = 0x5bd1e995
  const r = 24
  const length = buf.length
  let h = seed ^ length
  const length4 = Math.floor(length / 4)
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4
    let k = (buf[i4] & 0xff) + ((buf[i4 + 1] & 0xff) << 8) + ((buf[i4 + 2] & 0xff) << 16) + ((buf[i4 + 3] & 0xff) << 24)
    k = Math.imul(k, m)
    k ^= k >>> r
    k = Math.imul(k, m)
    h = Math.imul(h, m)
    h ^= k
  }
  const tail = length & ~3
  switch (length % 4) {
    case 3:
      h ^= (buf[tail + 2] & 0xff) << 16
    // falls through
    case 2:
      h ^= (buf[tail + 1] & 0xff) << 8
    // falls through
    case 1:
      h ^= buf[tail] & 0xff
      h = Math.imul(h, m)
  }
  h ^= h >>> 13
  h = Math.imul(h, m)
  h ^= h >>> 15
  return h | 0
}

function javaPartition(key, partitions) {
  return (murmur2(Buffer.from(key)) & 0x7fffffff) % partitions
}

module.exports = { results, check, expect, murmur2, javaPartition }
