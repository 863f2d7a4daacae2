#!/usr/bin/env node
// kafkajs against a running weir cluster: the brokers and the controller it
// sees, the replicas of a topic, and a group consumer reading back records
// that another client produced with keys `key-<i>` and values `value-<i>`.
//
// Usage: node cluster_check.js --bootstrap H:P,H:P,H:P --brokers 1,2,3
//          --controller ID --topic T --partitions P --replicas R --records N
//
// Each check prints `PASS <name>` or `FAIL <name>: <reason>`; the exit code
// is non-zero if any check failed.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const { results, check, expect, javaPartition } = require('./common')

function parseArgs(argv) {
  const args = {}
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i]
    const v = argv[++i]
    if (a === '--bootstrap') args.bootstrap = v.split(',')
    else if (a === '--brokers') args.brokers = v.split(',').map((s) => parseInt(s, 10))
    else if (a === '--controller') args.controller = parseInt(v, 10)
    else if (a === '--topic') args.topic = v
    else if (a === '--partitions') args.partitions = parseInt(v, 10)
    else if (a === '--replicas') args.replicas = parseInt(v, 10)
    else if (a === '--records') args.records = parseInt(v, 10)
    else throw new Error(`unknown argument ${a}`)
  }
  for (const k of ['bootstrap', 'brokers', 'controller', 'topic', 'partitions', 'replicas', 'records']) {
    if (args[k] === undefined) throw new Error(`--${k} is required`)
  }
  return args
}

async function main() {
  const args = parseArgs(process.argv)
  const kafka = new Kafka({
    clientId: 'weir-compat-kafkajs-cluster',
    brokers: args.bootstrap,
    logLevel: logLevel.ERROR,
    retry: { retries: 5 },
  })
  const admin = kafka.admin()
  await admin.connect()

  await check('describeCluster: every broker and the controller', async () => {
    const d = await admin.describeCluster()
    const ids = d.brokers.map((b) => b.nodeId).sort((a, b) => a - b)
    expect(JSON.stringify(ids) === JSON.stringify(args.brokers), `brokers ${ids}, want ${args.brokers}`)
    expect(d.controller === args.controller, `controller ${d.controller}, want ${args.controller}`)
  })

  await check(`fetchTopicMetadata: ${args.partitions} partitions of ${args.replicas} distinct replicas`, async () => {
    const { topics } = await admin.fetchTopicMetadata({ topics: [args.topic] })
    const parts = topics[0].partitions
    expect(parts.length === args.partitions, `${parts.length} partitions`)
    for (const p of parts) {
      expect(new Set(p.replicas).size === args.replicas, `partition ${p.partitionId}: replicas ${p.replicas}`)
      expect(p.replicas.includes(p.leader), `partition ${p.partitionId}: leader ${p.leader} not a replica`)
    }
  })

  await check('group consumer reads every record on its key partition', async () => {
    const n = args.records
    const consumer = kafka.consumer({ groupId: `js-cluster-${Math.random().toString(16).slice(2, 10)}` })
    await consumer.connect()
    await consumer.subscribe({ topic: args.topic, fromBeginning: true })
    const seen = new Set()
    let failure = null
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`consumed ${seen.size} of ${n} before the deadline`)), 60000)
      consumer
        .run({
          eachMessage: async ({ partition, message }) => {
            try {
              const key = message.key.toString()
              const i = parseInt(key.slice('key-'.length), 10)
              expect(!seen.has(i), `record ${i} delivered twice`)
              expect(message.value.toString() === `value-${i}`, `value of ${key}: ${message.value}`)
              expect(partition === javaPartition(key, args.partitions), `${key} on partition ${partition}`)
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
