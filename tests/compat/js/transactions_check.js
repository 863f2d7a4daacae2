#!/usr/bin/env node
// Transactional producers with kafkajs against a weir broker.
//
// Usage: node transactions_check.js --bootstrap HOST:PORT
//
// Checks:
//   read_committed     a transaction commits a batch, the next aborts one, a
//                      last one commits an end record: a read_committed
//                      consumer (kafkajs's default) reads the committed batch
//                      and the end record and nothing else
//   read_uncommitted   the same log with readUncommitted: both batches in log
//                      order, the markers' offsets never handed out
//   fenced at commit   a second producer with the same transactionalId fences
//                      the first: the old one's commit fails with
//                      INVALID_PRODUCER_EPOCH (kafkajs 2.2.4 speaks EndTxn
//                      v0-1, whose answer for PRODUCER_FENCED is that code,
//                      as Kafka's; the client knows no code 90), its open
//                      transaction is aborted (read_uncommitted sees its
//                      records, read_committed does not), the new one commits
//   fenced at send     the same, the old producer's next send failing with
//                      INVALID_PRODUCER_EPOCH (the partition has the newer
//                      epoch of the abort marker)
//   fenced between     the old producer has committed and is idle when the
//                      new one starts: its next transaction fails
//                      (INVALID_PRODUCER_EPOCH or PRODUCER_FENCED)
//   timeout            a transaction left open past its transactionTimeout
//                      is aborted by the coordinator: the read_committed end
//                      offset (the LSO) moves past it and its marker, and its
//                      producer's commit fails
//   sendOffsets        consume-transform-produce in a consumer group with
//                      autoCommit off: the input offsets the transactions
//                      commit with sendOffsets become the group's committed
//                      offsets; a transaction that aborts leaves them where
//                      they were, and the group's next consumer reads the
//                      aborted round's input again; every input is in the
//                      output exactly once for read_committed
//
// The broker must run with a short
// `transaction.abort.timed.out.transaction.cleanup.interval.ms` (timeout).
// A reader never waits for records to stop coming: the last transaction of
// every check commits an end record, and reading stops when it arrives
// (records of a partition arrive in order). Each check prints `PASS <name>`
// or `FAIL <name>: <reason>`, after a line saying what it saw; the exit code
// is non-zero if any check failed. Every wait is bounded.
'use strict'

const crypto = require('crypto')
const { Kafka, logLevel } = require('kafkajs')
const { results, check, expect } = require('./common')

const TIMEOUT_MS = 30000

function parseArgs(argv) {
  const args = {}
  for (let i = 2; i < argv.length; i++) {
    if (argv[i] === '--bootstrap') args.bootstrap = argv[++i]
    else throw new Error(`unknown argument ${argv[i]}`)
  }
  if (!args.bootstrap) throw new Error('--bootstrap HOST:PORT is required')
  return args
}

const rand = () => crypto.randomBytes(4).toString('hex')
const values = (prefix, n) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`)
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b)

function seen(what) {
  console.log(`  seen: ${what}`)
}

async function createTopic(admin, topic, numPartitions) {
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions }] })
  return topic
}

async function transactional(kafka, transactionalId, extra = {}) {
  const p = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1, ...extra })
  await p.connect()
  return p
}

async function waitFor(what, fn) {
  const deadline = Date.now() + TIMEOUT_MS
  for (;;) {
    if (await fn()) return
    expect(Date.now() < deadline, `${what} within ${TIMEOUT_MS} ms`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

// One transaction writing `vals` to partition 0 of `topic`.
async function inTransaction(producer, topic, vals, commit) {
  const tx = await producer.transaction()
  await tx.send({ topic, messages: vals.map((value) => ({ value, partition: 0 })) })
  if (commit) await tx.commit()
  else await tx.abort()
}

// The kafkajs protocol error type of `e`, looking through the retrier's
// wrapping.
function errorType(e) {
  for (let cur = e; cur; cur = cur.cause || cur.originalError) {
    if (cur.type) return cur.type
  }
  return `${e && e.name}: ${e && e.message}`
}

// Every record of `topic` up to and including the one whose value is
// `last`, as [partition, offset, value], read in a group of its own.
async function readThrough(kafka, topic, readUncommitted, last) {
  const consumer = kafka.consumer({
    groupId: `js-txn-reader-${rand()}`,
    readUncommitted,
    maxWaitTimeInMs: 100,
  })
  await consumer.connect()
  const out = []
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    let done = false
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no ${last} within ${TIMEOUT_MS} ms; read ${JSON.stringify(out)}`)),
        TIMEOUT_MS,
      )
      consumer
        .run({
          autoCommit: false,
          eachMessage: async ({ partition, message }) => {
            if (done) return
            const value = message.value.toString()
            out.push([partition, Number(message.offset), value])
            if (value === last) {
              done = true
              clearTimeout(timer)
              resolve()
            }
          },
        })
        .catch(reject)
    })
  } finally {
    await consumer.disconnect()
  }
  return out
}

async function checkVisibility(kafka, admin) {
  const topic = await createTopic(admin, `js-txn-vis-${rand()}`, 1)
  const p = await transactional(kafka, `js-vis-${rand()}`)
  try {
    await inTransaction(p, topic, values('committed', 10), true)
    await inTransaction(p, topic, values('aborted', 10), false)
    await inTransaction(p, topic, ['end'], true)
  } finally {
    await p.disconnect()
  }
  await check('read_committed', async () => {
    const got = (await readThrough(kafka, topic, false, 'end')).map(([, , v]) => v)
    const want = [...values('committed', 10), 'end']
    expect(same(got, want), `read ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
    seen(`${got.length} records, the committed batch and the end record, none aborted`)
  })
  await check('read_uncommitted', async () => {
    const read = await readThrough(kafka, topic, true, 'end')
    const got = read.map(([, , v]) => v)
    const want = [...values('committed', 10), ...values('aborted', 10), 'end']
    expect(same(got, want), `read ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
    // Offsets 10 (COMMIT) and 21 (ABORT) are the markers.
    const offsets = read.map(([, o]) => o)
    const wantOffsets = [...Array(10).keys(), ...Array.from({ length: 10 }, (_, i) => 11 + i), 22]
    expect(same(offsets, wantOffsets), `offsets ${offsets}, want ${wantOffsets}`)
    seen(`${got.length} records, both batches in log order, the markers at offsets 10 and 21 skipped`)
  })
}

async function checkFenced(kafka, admin, at) {
  const topic = await createTopic(admin, `js-txn-fence-${at}-${rand()}`, 1)
  const tid = `js-fence-${rand()}`
  const old = await transactional(kafka, tid)
  const fresh = await transactional(kafka, tid)
  let fenced
  try {
    const zombie = await old.transaction()
    await zombie.send({ topic, messages: values('zombie', 4).map((value) => ({ value, partition: 0 })) })
    // The new instance's InitProducerId bumps the epoch and aborts the old
    // one's open transaction (kafkajs retries CONCURRENT_TRANSACTIONS until
    // the abort is done).
    const live = await fresh.transaction()
    try {
      if (at === 'send') await zombie.send({ topic, messages: [{ value: 'zombie-late', partition: 0 }] })
      else await zombie.commit()
    } catch (e) {
      fenced = errorType(e)
    }
    expect(fenced !== undefined, `the fenced producer's ${at} succeeded`)
    expect(fenced === 'INVALID_PRODUCER_EPOCH', `the fenced producer's ${at} failed with ${fenced}`)
    await live.send({ topic, messages: [...values('live', 3), 'end'].map((value) => ({ value, partition: 0 })) })
    await live.commit()
  } finally {
    await old.disconnect()
    await fresh.disconnect()
  }
  const got = (await readThrough(kafka, topic, false, 'end')).map(([, , v]) => v)
  const want = [...values('live', 3), 'end']
  expect(same(got, want), `read_committed read ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
  const raw = (await readThrough(kafka, topic, true, 'end')).map(([, , v]) => v)
  expect(same(raw.slice(0, 4), values('zombie', 4)), `read_uncommitted read ${raw}: no zombie batch`)
  expect(!raw.includes('zombie-late'), `the fenced send was written: ${raw}`)
  seen(`the old producer's ${at} failed with ${fenced}; read_committed read only ${JSON.stringify(got)}`)
}

async function checkFencedBetween(kafka, admin) {
  const topic = await createTopic(admin, `js-txn-fence-idle-${rand()}`, 1)
  const id = `js-fence-idle-${rand()}`
  const first = await transactional(kafka, id)
  const second = await transactional(kafka, id)
  let fenced
  try {
    await inTransaction(first, topic, ['first'], true)
    // kafkajs initializes a transactional producer at its first transaction
    const live = await second.transaction()
    try {
      await inTransaction(first, topic, ['zombie'], true)
    } catch (e) {
      fenced = errorType(e)
    }
    expect(fenced !== undefined, 'the idle producer was not fenced')
    expect(/INVALID_PRODUCER_EPOCH|PRODUCER_FENCED/.test(fenced), `the idle producer failed with ${fenced}`)
    await live.send({ topic, messages: ['second', 'end'].map((value) => ({ value, partition: 0 })) })
    await live.commit()
  } finally {
    await first.disconnect()
    await second.disconnect()
  }
  const got = (await readThrough(kafka, topic, false, 'end')).map(([, , v]) => v)
  expect(same(got, ['first', 'second', 'end']), `read_committed read ${JSON.stringify(got)}`)
  seen(`its next transaction failed with ${fenced}; read_committed read ${JSON.stringify(got)}`)
}

async function checkTimeout(kafka, admin) {
  const topic = await createTopic(admin, `js-txn-slow-${rand()}`, 1)
  const p = await transactional(kafka, `js-slow-${rand()}`, { transactionTimeout: 1000 })
  let failed
  try {
    const tx = await p.transaction()
    await tx.send({ topic, messages: [{ value: 'left-open', partition: 0 }] })
    // ListOffsets (read_committed) answers the LSO: 0 while the transaction
    // is open, 2 (past the record and the ABORT marker) once the
    // coordinator aborted it
    const lso = async () => (await admin.fetchTopicOffsets(topic))[0].offset
    await waitFor('the coordinator aborting the transaction', async () => (await lso()) === '2')
    try {
      await tx.commit()
    } catch (e) {
      failed = errorType(e)
    }
    expect(failed !== undefined, 'committing an aborted transaction succeeded')
  } finally {
    await p.disconnect()
  }
  seen(`the last stable offset moved past the aborted record; the commit failed with ${failed}`)
}

// The group's committed offsets of `topic`, by partition.
async function committed(admin, groupId, topic) {
  const [t] = await admin.fetchOffsets({ groupId, topics: [topic] })
  const out = {}
  for (const p of t.partitions) out[p.partition] = Number(p.offset)
  return out
}

// Polls the group's committed offsets until they equal `want`: a commit
// returns once the coordinator has logged it, its markers follow.
async function waitCommitted(admin, groupId, topic, want) {
  const deadline = Date.now() + TIMEOUT_MS
  for (;;) {
    const got = await committed(admin, groupId, topic)
    if (same(got, want)) return
    expect(Date.now() < deadline, `committed offsets ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

// One round of consume-transform-produce: a consumer in `groupId` (offsets
// never committed by the consumer itself) reads `input` from the group's
// committed offsets, and each batch becomes one transaction that writes
// `out-<value>` to `output`, commits the batch's next offset with
// sendOffsets and then commits, or aborts with `commit` false. Stops after
// `n` input records; returns them as [partition, offset, value].
async function transformRound(kafka, producer, groupId, input, output, n, commit) {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 100 })
  await consumer.connect()
  const consumed = []
  try {
    await consumer.subscribe({ topics: [input], fromBeginning: true })
    let failure = null
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`consumed ${consumed.length} of ${n} within ${TIMEOUT_MS} ms`)),
        TIMEOUT_MS,
      )
      consumer
        .run({
          autoCommit: false,
          eachBatch: async ({ batch, resolveOffset }) => {
            if (consumed.length >= n || failure) return
            try {
              const tx = await producer.transaction()
              const messages = batch.messages.map((m) => ({
                value: `out-${m.value.toString()}`,
                partition: 0,
              }))
              await tx.send({ topic: output, messages })
              await tx.sendOffsets({
                consumerGroupId: groupId,
                topics: [
                  {
                    topic: input,
                    partitions: [{ partition: batch.partition, offset: String(Number(batch.lastOffset()) + 1) }],
                  },
                ],
              })
              if (commit) await tx.commit()
              else await tx.abort()
              for (const m of batch.messages) {
                consumed.push([batch.partition, Number(m.offset), m.value.toString()])
                resolveOffset(m.offset)
              }
            } catch (e) {
              failure = e
            }
            if (failure || consumed.length >= n) {
              clearTimeout(timer)
              if (failure) reject(failure)
              else resolve()
            }
          },
        })
        .catch(reject)
    })
  } finally {
    await consumer.disconnect()
  }
  return consumed
}

async function checkSendOffsets(kafka, admin) {
  const input = await createTopic(admin, `js-txn-in-${rand()}`, 2)
  const output = await createTopic(admin, `js-txn-out-${rand()}`, 1)
  const groupId = `js-txn-ctp-${rand()}`
  const plain = kafka.producer()
  await plain.connect()
  const produce = (vals) =>
    plain.send({ topic: input, messages: vals.map((value, i) => ({ value, partition: i % 2 })) })
  const processor = await transactional(kafka, `js-ctp-${rand()}`)
  try {
    // Round 1: in-0..9, five per partition, committed with their offsets.
    await produce(values('in', 10))
    const first = await transformRound(kafka, processor, groupId, input, output, 10, true)
    expect(first.length === 10, `round 1 consumed ${JSON.stringify(first)}`)
    await waitCommitted(admin, groupId, input, { 0: 5, 1: 5 })

    // Round 2: four more, processed in transactions that abort.
    const more = values('in', 14).slice(10)
    await produce(more)
    const aborted = await transformRound(kafka, processor, groupId, input, output, 4, false)
    const abortedValues = aborted.map(([, , v]) => v).sort()
    expect(same(abortedValues, [...more].sort()), `round 2 started at ${JSON.stringify(aborted)}, not at the committed offsets`)
    // A committed transaction of the same producer starts only once the
    // aborted one's markers are written (CONCURRENT_TRANSACTIONS until
    // then), the one on __consumer_offsets included.
    await inTransaction(processor, output, ['settled'], true)
    const afterAbort = await committed(admin, groupId, input)
    expect(same(afterAbort, { 0: 5, 1: 5 }), `committed offsets moved by an aborted transaction: ${JSON.stringify(afterAbort)}`)

    // Round 3: the group's next consumer reads the aborted round's input
    // again and commits it.
    const again = await transformRound(kafka, processor, groupId, input, output, 4, true)
    const againValues = again.map(([, , v]) => v).sort()
    expect(same(againValues, [...more].sort()), `round 3 read ${JSON.stringify(again)}, want the aborted round's input`)
    await waitCommitted(admin, groupId, input, { 0: 7, 1: 7 })

    await inTransaction(processor, output, ['end'], true)
    const got = (await readThrough(kafka, output, false, 'end')).map(([, , v]) => v)
    const outputs = got.filter((v) => v.startsWith('out-')).sort()
    const want = values('in', 14).map((v) => `out-${v}`).sort()
    expect(same(outputs, want), `read_committed output ${JSON.stringify(got)}, want each of ${JSON.stringify(want)} once`)
    seen(
      'offsets {0:5,1:5} after the committed round, still {0:5,1:5} after the aborted round, ' +
        `{0:7,1:7} after its input was processed again; read_committed output has ${outputs.length} records, each input once`,
    )
  } finally {
    await processor.disconnect()
    await plain.disconnect()
  }
}

async function main() {
  const args = parseArgs(process.argv)
  const kafka = new Kafka({
    clientId: 'weir-transactions',
    brokers: [args.bootstrap],
    logLevel: logLevel.NOTHING,
  })
  const admin = kafka.admin()
  await admin.connect()
  await checkVisibility(kafka, admin)
  await check('fenced at commit', () => checkFenced(kafka, admin, 'commit'))
  await check('fenced at send', () => checkFenced(kafka, admin, 'send'))
  await check('fenced between', () => checkFencedBetween(kafka, admin))
  await check('timeout', () => checkTimeout(kafka, admin))
  await check('sendOffsets', () => checkSendOffsets(kafka, admin))
  await admin.disconnect()
  return results.length > 0 && results.every(([, ok]) => ok) ? 0 : 1
}

main()
  .then((code) => process.exit(code))
  .catch((e) => {
    console.log(`FAIL setup: ${e && e.stack ? e.stack : e}`)
    process.exit(1)
  })
