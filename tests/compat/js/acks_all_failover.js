#!/usr/bin/env node
// kafkajs producing with acks=all (idempotent) to partition 0 of a topic
// while the test kills the partition's leader: the test reads the
// acknowledged values back from the new leader.
//
// Usage: node acks_all_failover.js --bootstrap H:P,H:P,H:P --topic T
//          --records N --prefix P
//
// Sends the values `<P>-0` .. `<P>-<N-1>` one after another and prints one
// line per record as its send settles: `ACK <value> <offset>` or
// `ERR <value> <error>`, then `DONE acked=<a> failed=<f> idempotent=true`.
// Exits non-zero only when the producer itself cannot run.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

function parseArgs(argv) {
  const args = {}
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i]
    const v = argv[++i]
    if (a === '--bootstrap') args.bootstrap = v.split(',')
    else if (a === '--topic') args.topic = v
    else if (a === '--records') args.records = parseInt(v, 10)
    else if (a === '--prefix') args.prefix = v
    else throw new Error(`unknown argument ${a}`)
  }
  for (const k of ['bootstrap', 'topic', 'records', 'prefix']) {
    if (args[k] === undefined) throw new Error(`--${k} is required`)
  }
  return args
}

// Retries enough to outlast a failover (session timeout and metadata).
const RETRY = { initialRetryTime: 200, maxRetryTime: 2000, retries: 30 }

async function main() {
  const args = parseArgs(process.argv)
  const kafka = new Kafka({
    clientId: 'weir-compat-failover',
    brokers: args.bootstrap,
    logLevel: logLevel.NOTHING,
    requestTimeout: 5000,
    retry: RETRY,
  })
  // kafkajs requires one request in flight for idempotence.
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, retry: RETRY })
  await producer.connect()
  let acked = 0
  let failed = 0
  for (let i = 0; i < args.records; i++) {
    const value = `${args.prefix}-${i}`
    try {
      const [md] = await producer.send({ topic: args.topic, acks: -1, messages: [{ value, partition: 0 }] })
      acked++
      console.log(`ACK ${value} ${md.baseOffset}`)
    } catch (e) {
      failed++
      console.log(`ERR ${value} ${e && e.name}: ${e && e.message}`)
    }
  }
  await producer.disconnect()
  console.log(`DONE acked=${acked} failed=${failed} idempotent=true`)
}

main().catch((e) => {
  console.error(e)
  process.exit(2)
})
