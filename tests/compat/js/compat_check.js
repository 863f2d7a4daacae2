#!/usr/bin/env node
// kafkajs compatibility checks against a running weir broker.
//
// Usage: node compat_check.js --bootstrap HOST:PORT [--records N] [--mode admin-produce|consume]
//
// Each check prints `PASS <name>` or `FAIL <name>: <reason>`; the exit code
// is non-zero if any check failed. `--mode consume` exercises kafkajs's
// consumer, which always uses a consumer group (JoinGroup/SyncGroup/...).
'use strict'

const {
  Kafka,
  CompressionTypes,
  CompressionCodecs,
  ConfigResourceTypes,
  logLevel,
} = require('kafkajs')

const PARTITIONS = 6
const { results, check, expect, murmur2, javaPartition } = require('./common')

function parseArgs(argv) {
  const args = { records: 2000, mode: 'admin-produce', keepTopics: false }
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--bootstrap') args.bootstrap = argv[++i]
    else if (a === '--records') args.records = parseInt(argv[++i], 10)
    else if (a === '--mode') args.mode = argv[++i]
    // Keep the per-codec topics for the caller to inspect; the delete check
    // then uses a topic of its own.
    else if (a === '--keep-topics') args.keepTopics = true
    else throw new Error(`unknown argument ${a}`)
  }
  if (!args.bootstrap) throw new Error('--bootstrap HOST:PORT is required')
  return args
}


// Optional codecs: kafkajs ships gzip; the others come from plugin packages.
function registerCodecs() {
  const available = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }
  try {
    CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
    available.snappy = CompressionTypes.Snappy
  } catch (e) {
    console.log(`NOTE snappy not tested: kafkajs-snappy not loadable (${e.message})`)
  }
  try {
    const LZ4 = require('kafkajs-lz4')
    CompressionCodecs[CompressionTypes.LZ4] = new LZ4().codec
    available.lz4 = CompressionTypes.LZ4
  } catch (e) {
    console.log(`NOTE lz4 not tested: kafkajs-lz4 not loadable (${e.message})`)
  }
  try {
    const { ZSTD } = require('@kafkajs/zstd')
    CompressionCodecs[CompressionTypes.ZSTD] = ZSTD()
    available.zstd = CompressionTypes.ZSTD
  } catch (e) {
    console.log('NOTE zstd not tested: @kafkajs/zstd is not installed (its native build fails on this Node)')
  }
  return available
}

function valueFor(i, codec) {
  return `value-${i}-${codec}-` + 'z'.repeat(10 + (i % 120))
}

async function produceAll(kafka, topic, codec, compression, n, baseTs) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  try {
    const chunk = 500
    for (let start = 0; start < n; start += chunk) {
      const messages = []
      for (let i = start; i < Math.min(n, start + chunk); i++) {
        messages.push({
          key: `key-${i}`,
          value: valueFor(i, codec),
          headers: { idx: String(i), codec },
          timestamp: String(baseTs + i),
        })
      }
      const meta = await producer.send({ topic, acks: -1, compression, messages })
      for (const m of meta) expect(m.errorCode === 0, `produce error ${JSON.stringify(m)}`)
    }
  } finally {
    await producer.disconnect()
  }
}

function expectedPerPartition(n) {
  const per = Array.from({ length: PARTITIONS }, () => [])
  for (let i = 0; i < n; i++) per[javaPartition(`key-${i}`, PARTITIONS)].push(i)
  return per
}

async function adminAndProduce(args) {
  const kafka = new Kafka({
    clientId: 'weir-compat-kafkajs',
    brokers: [args.bootstrap],
    logLevel: logLevel.ERROR,
    retry: { retries: 5 },
  })
  const admin = kafka.admin()
  const connected = await check('admin: connect', () => admin.connect())
  if (!connected) return
  const codecs = registerCodecs()
  const runId = Math.random().toString(16).slice(2, 10)
  const n = args.records
  const created = []

  await check('murmur2 matches Kafka Java vectors', async () => {
    const vectors = { '21': -973932308, foobar: -790332482, 'a-little-bit-long-string': -985981536 }
    for (const [s, want] of Object.entries(vectors)) {
      expect(murmur2(Buffer.from(s)) === want, `murmur2(${s}) = ${murmur2(Buffer.from(s))}, want ${want}`)
    }
  })

  for (const [codec, compression] of Object.entries(codecs)) {
    const topic = `js-${codec}-${runId}`
    const ok = await check(`admin: createTopics + fetchTopicMetadata [${codec}]`, async () => {
      const made = await admin.createTopics({
        topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }],
        waitForLeaders: true,
      })
      expect(made === true, `createTopics returned ${made}`)
      const md = await admin.fetchTopicMetadata({ topics: [topic] })
      const t = md.topics.find((x) => x.name === topic)
      expect(t, `topic missing from metadata: ${JSON.stringify(md)}`)
      expect(t.partitions.length === PARTITIONS, `partitions: ${JSON.stringify(t.partitions)}`)
      for (const p of t.partitions) expect(p.leader >= 0, `no leader: ${JSON.stringify(p)}`)
    })
    if (!ok) continue
    created.push(topic)
    const baseTs = Date.now() - 3600000
    const produced = await check(`idempotent produce acks=-1 [${codec}]`, () =>
      produceAll(kafka, topic, codec, compression, n, baseTs),
    )
    if (!produced) continue
    // For the caller: which topic holds which client codec.
    console.log(`TOPIC ${codec} ${topic} ${PARTITIONS}`)
    const per = expectedPerPartition(n)
    await check(`fetchTopicOffsets: murmur2 partition counts [${codec}]`, async () => {
      const offs = await admin.fetchTopicOffsets(topic)
      expect(offs.length === PARTITIONS, `partitions: ${JSON.stringify(offs)}`)
      for (const o of offs) {
        expect(o.low === '0', `partition ${o.partition} low ${o.low}`)
        expect(
          o.high === String(per[o.partition].length),
          `partition ${o.partition}: high ${o.high}, murmur2 put ${per[o.partition].length} records there`,
        )
      }
    })
    await check(`fetchTopicOffsetsByTimestamp [${codec}]`, async () => {
      const queryTs = baseTs + Math.floor(n / 2)
      const offs = await admin.fetchTopicOffsetsByTimestamp(topic, queryTs)
      for (const o of offs) {
        // Records of a partition have consecutive offsets from 0 in produce
        // order; the answer is the first whose timestamp >= the query (when
        // there is none, kafkajs reports the high watermark).
        const before = per[o.partition].filter((i) => baseTs + i < queryTs).length
        expect(o.offset === String(before), `partition ${o.partition}: offset ${o.offset}, expected ${before}`)
      }
    })
  }

  if (created.length > 0) {
    const topic = created[0]
    await check('admin: describeConfigs / alterConfigs', async () => {
      const describe = async () => {
        const res = await admin.describeConfigs({
          resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
          includeSynonyms: false,
        })
        const r = res.resources[0]
        expect(r.errorCode === 0, `describeConfigs error ${JSON.stringify(r)}`)
        return Object.fromEntries(r.configEntries.map((e) => [e.configName, e]))
      }
      const before = await describe()
      for (const name of ['retention.ms', 'cleanup.policy', 'segment.bytes', 'max.message.bytes']) {
        expect(before[name], `${name} missing: ${Object.keys(before)}`)
      }
      expect(before['cleanup.policy'].configValue === 'delete', `cleanup.policy ${JSON.stringify(before['cleanup.policy'])}`)
      await admin.alterConfigs({
        validateOnly: false,
        resources: [
          { type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'retention.ms', value: '123456789' }] },
        ],
      })
      const after = await describe()
      expect(after['retention.ms'].configValue === '123456789', `retention.ms after alter: ${JSON.stringify(after['retention.ms'])}`)
      expect(after['retention.ms'].isDefault === false, `retention.ms still default: ${JSON.stringify(after['retention.ms'])}`)
    })
    await check('admin: deleteTopics', async () => {
      let doomed = created
      if (args.keepTopics) {
        doomed = [`js-delete-${runId}`]
        await admin.createTopics({ topics: [{ topic: doomed[0], numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true })
      }
      await admin.deleteTopics({ topics: doomed, timeout: 10000 })
      const left = await admin.listTopics()
      for (const t of doomed) expect(!left.includes(t), `${t} still listed after delete: ${left}`)
    })
  }
  await admin.disconnect()
}

async function consume(args) {
  const kafka = new Kafka({
    clientId: 'weir-compat-kafkajs-consumer',
    brokers: [args.bootstrap],
    logLevel: logLevel.ERROR,
    retry: { retries: 5 },
  })
  const admin = kafka.admin()
  await admin.connect()
  const runId = Math.random().toString(16).slice(2, 10)
  const topic = `js-consume-${runId}`
  const n = args.records
  const baseTs = Date.now() - 3600000
  await check('admin: createTopics', () =>
    admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: true }),
  )
  await check('produce [gzip]', () => produceAll(kafka, topic, 'gzip', CompressionTypes.GZIP, n, baseTs))
  await check('group consumer reads everything back in partition order', async () => {
    const consumer = kafka.consumer({ groupId: `js-group-${runId}` })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    const seen = new Set()
    const last = new Map()
    let failure = null
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${seen.size} of ${n} before the deadline`)), 120000)
      consumer
        .run({
          eachMessage: async ({ partition, message }) => {
            try {
              const i = parseInt(message.headers.idx.toString(), 10)
              expect(!seen.has(i), `record ${i} delivered twice`)
              expect(message.key.toString() === `key-${i}`, `key of ${i}: ${message.key}`)
              expect(message.value.toString() === valueFor(i, 'gzip'), `value of ${i}`)
              expect(message.timestamp === String(baseTs + i), `timestamp of ${i}: ${message.timestamp}`)
              expect(partition === javaPartition(`key-${i}`, PARTITIONS), `record ${i} on partition ${partition}`)
              const prev = last.get(partition)
              expect(prev === undefined || i > prev, `partition ${partition}: record ${i} after ${prev}`)
              last.set(partition, i)
              seen.add(i)
            } catch (e) {
              failure = failure || e
            }
            if (failure || seen.size === n) {
              clearTimeout(timer)
              resolve()
            }
          },
        })
        .catch(reject)
    })
    await consumer.disconnect()
    if (failure) throw failure
    expect(seen.size === n, `consumed ${seen.size} of ${n}`)
  })
  await admin.disconnect()
}

async function main() {
  const args = parseArgs(process.argv)
  if (args.mode === 'consume') await consume(args)
  else if (args.mode === 'admin-produce') await adminAndProduce(args)
  else throw new Error(`unknown mode ${args.mode}`)
  const passed = results.filter(([, ok]) => ok).length
  const failed = results.length - passed
  console.log(`kafkajs summary: ${passed} checks passed, ${failed} checks failed`)
  return failed === 0 && passed > 0 ? 0 : 1
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.log(`FAIL kafkajs run: ${e && e.stack ? e.stack : e}`)
    process.exit(1)
  },
)
