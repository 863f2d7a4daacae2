#!/usr/bin/env node
// kafkajs over a secured listener of a weir broker: SSL with a client
// certificate, SASL_SSL or SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512. Produces records to a new topic and consumes them back
// (a consumer group, the only way kafkajs consumes), or with --refused
// checks that the broker turns the client away: a wrong password with
// KafkaJSSASLAuthenticationError carrying the broker's message, a missing
// client certificate with a failed connection.
//
// Usage: node security_check.js --bootstrap HOST:PORT --protocol SSL|SASL_SSL|SASL_PLAINTEXT
//          [--ca CA.pem] [--cert C.pem --key K.pem]
//          [--mechanism PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 --username U --password P]
//          [--records N] [--refused]
//
// Each check prints `PASS <name>` or `FAIL <name>: <reason>`; the exit code
// is non-zero if any check failed.
'use strict'

const fs = require('fs')
const crypto = require('crypto')
const { Kafka, logLevel } = require('kafkajs')
const { results, check, expect } = require('./common')

function parseArgs(argv) {
  const args = { records: 200, refused: false }
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--bootstrap') args.bootstrap = argv[++i]
    else if (a === '--protocol') args.protocol = argv[++i]
    else if (a === '--ca') args.ca = argv[++i]
    else if (a === '--cert') args.cert = argv[++i]
    else if (a === '--key') args.key = argv[++i]
    else if (a === '--mechanism') args.mechanism = argv[++i]
    else if (a === '--username') args.username = argv[++i]
    else if (a === '--password') args.password = argv[++i]
    else if (a === '--records') args.records = parseInt(argv[++i], 10)
    else if (a === '--refused') args.refused = true
    else throw new Error(`unknown argument ${a}`)
  }
  if (!args.bootstrap || !args.protocol) throw new Error('--bootstrap and --protocol are required')
  return args
}

// kafkajs's client settings for the listener's security protocol.
function clientConfig(args) {
  const config = {
    clientId: 'weir-security-check',
    brokers: [args.bootstrap],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 10000,
    // a refusal is final: no retries, so the error surfaces at once
    retry: { retries: args.refused ? 0 : 5 },
  }
  if (args.protocol === 'SSL' || args.protocol === 'SASL_SSL') {
    const ssl = { rejectUnauthorized: true }
    if (args.ca) ssl.ca = [fs.readFileSync(args.ca, 'utf8')]
    if (args.cert) ssl.cert = fs.readFileSync(args.cert, 'utf8')
    if (args.key) ssl.key = fs.readFileSync(args.key, 'utf8')
    config.ssl = ssl
  }
  if (args.protocol === 'SASL_SSL' || args.protocol === 'SASL_PLAINTEXT') {
    config.sasl = {
      mechanism: args.mechanism.toLowerCase(),
      username: args.username,
      password: args.password,
    }
  }
  return config
}

async function roundTrip(kafka, args) {
  const topic = `sec-js-${crypto.randomBytes(4).toString('hex')}`
  const values = Array.from({ length: args.records }, (_, i) => `js-${args.protocol}-${i}`)
  const what = `${args.protocol}${args.mechanism ? ' ' + args.mechanism : ''}`

  await check(`produce over ${what}`, async () => {
    const admin = kafka.admin()
    await admin.connect()
    try {
      await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true })
    } finally {
      await admin.disconnect()
    }
    const producer = kafka.producer()
    await producer.connect()
    try {
      await producer.send({ topic, acks: -1, messages: values.map((value) => ({ value, partition: 0 })) })
    } finally {
      await producer.disconnect()
    }
  })

  await check(`consume over ${what}`, async () => {
    const consumer = kafka.consumer({ groupId: `${topic}-group` })
    await consumer.connect()
    const got = []
    try {
      await consumer.subscribe({ topic, fromBeginning: true })
      await new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`consumed ${got.length} of ${values.length} within 30 s`)),
          30000,
        )
        consumer
          .run({
            eachMessage: async ({ message }) => {
              got.push(message.value.toString())
              if (got.length >= values.length) {
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
    expect(
      JSON.stringify(got) === JSON.stringify(values),
      `consumed ${got.length} records, not the ${values.length} produced in order`,
    )
  })
}

async function refused(kafka, args) {
  const sasl = args.protocol !== 'SSL'
  const name = sasl ? `${args.mechanism} over ${args.protocol} refused` : 'SSL without a client certificate refused'
  await check(name, async () => {
    const admin = kafka.admin()
    let error = null
    try {
      await admin.connect()
      await admin.listTopics()
    } catch (e) {
      error = e
    } finally {
      await admin.disconnect().catch(() => {})
    }
    expect(error !== null, 'the broker served the client')
    if (sasl) {
      expect(
        error.name === 'KafkaJSSASLAuthenticationError',
        `expected KafkaJSSASLAuthenticationError, got ${error.name}: ${error.message}`,
      )
      expect(
        /Invalid username or password/.test(error.message),
        `the broker's message is missing: ${error.message}`,
      )
    }
    console.log(`NOTE refused with ${error.name}: ${error.message}`)
  })
}

async function main() {
  const args = parseArgs(process.argv)
  const kafka = new Kafka(clientConfig(args))
  if (args.refused) await refused(kafka, args)
  else await roundTrip(kafka, args)
  const failed = results.filter(([, ok]) => !ok).length
  process.exit(failed === 0 ? 0 : 1)
}

main().catch((e) => {
  console.log(`FAIL security_check: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
