#!/usr/bin/env node
// Transactional producers with kafkajs, against the transaction
// coordinator:
//
//   visibility  committed transactions are read by a read_committed
//               consumer, an aborted one is not
//   fencing     a second producer with the same transactionalId fences the
//               first: its next transaction fails (INVALID_PRODUCER_EPOCH,
//               kafkajs speaks the versions before PRODUCER_FENCED)
//   timeout     a transaction left open past its transactionTimeout is
//               aborted by the coordinator: the last stable offset moves
//               past it, and its producer's commit fails
//
// The broker must run with a short
// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
//
// Usage: node txn_producer_check.js --bootstrap HOST:PORT
//
// Each check prints `PASS <name>` or `FAIL <name>: <reason>`; the exit code
// is non-zero if any check failed. Every wait is bounded.
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

function transactional(kafka, transactionalId, extra = {}) {
  return kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1, ...extra })
}

async function waitFor(what, fn, ms = 30000) {
  const deadline = Date.now() + ms
  for (;;) {
    if (await fn()) return
    expect(Date.now() < deadline, `${what} within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function main() {
  const args = parseArgs(process.argv)
  const suffix = crypto.randomBytes(4).toString('hex')
  const kafka = new Kafka({ clientId: 'weir-txn-producer', brokers: [args.bootstrap], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const topics = { vis: `js-txn-vis-${suffix}`, fence: `js-txn-fence-${suffix}`, slow: `js-txn-slow-${suffix}` }
  await admin.createTopics({
    waitForLeaders: true,
    topics: Object.values(topics).map((topic) => ({ topic, numPartitions: 1 })),
  })

  await check('visibility', async () => {
    const p = transactional(kafka, `js-vis-${suffix}`)
    await p.connect()
    try {
      let tx = await p.transaction()
      await tx.send({ topic: topics.vis, messages: [0, 1, 2, 3].map((i) => ({ value: `committed-${i}` })) })
      await tx.commit()
      tx = await p.transaction()
      await tx.send({ topic: topics.vis, messages: [0, 1, 2].map((i) => ({ value: `aborted-${i}` })) })
      await tx.abort()
      tx = await p.transaction()
      await tx.send({ topic: topics.vis, messages: [{ value: 'committed-last' }] })
      await tx.commit()
    } finally {
      await p.disconnect()
    }
    const consumer = kafka.consumer({ groupId: `js-vis-reader-${suffix}`, readUncommitted: false })
    await consumer.connect()
    const seen = []
    try {
      await consumer.subscribe({ topic: topics.vis, fromBeginning: true })
      await consumer.run({ eachMessage: async ({ message }) => { seen.push(message.value.toString()) } })
      // one partition: once the last record is read, the aborted ones
      // before it were skipped or read
      await waitFor('the last committed record read', () => seen.includes('committed-last'))
    } finally {
      await consumer.disconnect()
    }
    const want = ['committed-0', 'committed-1', 'committed-2', 'committed-3', 'committed-last']
    expect(JSON.stringify(seen) === JSON.stringify(want), `read_committed read ${JSON.stringify(seen)}`)
  })

  await check('fencing', async () => {
    const id = `js-fence-${suffix}`
    const first = transactional(kafka, id)
    const second = transactional(kafka, id)
    await first.connect()
    await second.connect()
    try {
      const tx = await first.transaction()
      await tx.send({ topic: topics.fence, messages: [{ value: 'first' }] })
      await tx.commit()
      // kafkajs initializes a transactional producer at its first transaction
      const tx2 = await second.transaction()
      let fenced = null
      try {
        const zombie = await first.transaction()
        await zombie.send({ topic: topics.fence, messages: [{ value: 'zombie' }] })
        await zombie.commit()
      } catch (e) {
        fenced = e
      }
      expect(fenced !== null, 'the first producer was not fenced')
      const type = fenced.type || (fenced.originalError && fenced.originalError.type) || String(fenced)
      expect(
        /INVALID_PRODUCER_EPOCH|PRODUCER_FENCED/.test(type) || /old epoch|fenced/i.test(String(fenced.message)),
        `fenced with ${type}: ${fenced.message}`,
      )
      await tx2.send({ topic: topics.fence, messages: [{ value: 'second' }] })
      await tx2.commit()
    } finally {
      await first.disconnect()
      await second.disconnect()
    }
  })

  await check('timeout', async () => {
    const p = transactional(kafka, `js-slow-${suffix}`, { transactionTimeout: 1000 })
    await p.connect()
    try {
      const tx = await p.transaction()
      await tx.send({ topic: topics.slow, messages: [{ value: 'left-open' }] })
      // ListOffsets (read_committed) answers the LSO: 0 while the
      // transaction is open, 2 (past the record and the ABORT marker) once
      // the coordinator aborted it
      const lso = async () => (await admin.fetchTopicOffsets(topics.slow))[0].offset
      await waitFor('the coordinator aborting the transaction', async () => (await lso()) === '2')
      let failed = null
      try {
        await tx.commit()
      } catch (e) {
        failed = e
      }
      expect(failed !== null, 'committing an aborted transaction succeeded')
    } finally {
      await p.disconnect()
    }
  })

  await admin.disconnect()
  return results.length > 0 && results.every(([, ok]) => ok) ? 0 : 1
}

main()
  .then((code) => process.exit(code))
  .catch((e) => {
    console.log(`FAIL setup: ${e && e.stack ? e.stack : e}`)
    process.exit(1)
  })
