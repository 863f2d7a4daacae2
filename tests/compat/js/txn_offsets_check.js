#!/usr/bin/env node
// Consumer group offsets committed in transactions, with kafkajs: a
// transactional producer's `sendOffsets` (AddOffsetsToTxn +
// TxnOffsetCommit) makes the offsets the group's when the transaction
// commits, and leaves the committed ones when a later transaction aborts.
//
// Usage: node txn_offsets_check.js --bootstrap HOST:PORT
//
// Each check prints `PASS <name>` or `FAIL <name>: <reason>`; the exit code
// is non-zero if any check failed.
'use strict'

const crypto = require('crypto')
const { Kafka, logLevel } = require('kafkajs')
const { results, check, expect } = require('./common')

function parseArgs(argv) {
  const args = {}
  for (let i = 2; i < argv.length; i++) {
    if (argv[i] === '--bootstrap') args.bootstrap = argv[++i]
    else throw new Error(`unknown argument ${argv[i]}`)
  }
  if (!args.bootstrap) throw new Error('--bootstrap HOST:PORT is required')
  return args
}

async function committed(admin, groupId, topic) {
  const [t] = await admin.fetchOffsets({ groupId, topics: [topic] })
  const out = {}
  for (const p of t.partitions) out[p.partition] = p.offset
  return out
}

async function main() {
  const args = parseArgs(process.argv)
  const suffix = crypto.randomBytes(4).toString('hex')
  const kafka = new Kafka({
    clientId: 'weir-txn-offsets',
    brokers: [args.bootstrap],
    logLevel: logLevel.WARN,
  })
  const admin = kafka.admin()
  await admin.connect()
  const source = `js-txn-src-${suffix}`
  const out = `js-txn-out-${suffix}`
  const groupId = `js-txn-group-${suffix}`
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: source, numPartitions: 2 },
      { topic: out, numPartitions: 1 },
    ],
  })
  const producer = kafka.producer({
    transactionalId: `js-tx-${suffix}`,
    idempotent: true,
    maxInFlightRequests: 1,
  })
  await producer.connect()
  const transaction = async (offsets, commit) => {
    const tx = await producer.transaction()
    await tx.send({ topic: out, messages: [{ value: 'processed' }] })
    await tx.sendOffsets({
      consumerGroupId: groupId,
      topics: [
        {
          topic: source,
          partitions: Object.entries(offsets).map(([partition, offset]) => ({
            partition: Number(partition),
            offset: String(offset),
          })),
        },
      ],
    })
    if (commit) await tx.commit()
    else await tx.abort()
  }

  await check('sendOffsets commit', async () => {
    await transaction({ 0: 5, 1: 7 }, true)
    // commit() returns once the coordinator has decided (PrepareCommit);
    // the offsets become visible when its marker reaches the group's
    // partition, a moment later (as with Kafka): poll, with a deadline.
    const deadline = Date.now() + 10000
    let got = await committed(admin, groupId, source)
    while (!(got[0] === '5' && got[1] === '7') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      got = await committed(admin, groupId, source)
    }
    expect(got[0] === '5' && got[1] === '7', `after COMMIT: ${JSON.stringify(got)}`)
  })
  await check('sendOffsets abort', async () => {
    await transaction({ 0: 8 }, false)
    const got = await committed(admin, groupId, source)
    expect(got[0] === '5' && got[1] === '7', `after ABORT: ${JSON.stringify(got)}`)
  })

  await producer.disconnect()
  await admin.disconnect()
  return results.length > 0 && results.every(([, ok]) => ok) ? 0 : 1
}

main()
  .then((code) => process.exit(code))
  .catch((e) => {
    console.log(`FAIL setup: ${e && e.stack ? e.stack : e}`)
    process.exit(1)
  })
