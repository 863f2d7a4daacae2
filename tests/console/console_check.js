#!/usr/bin/env node
// End-to-end check of weir's web console in headless Chromium (puppeteer-core
// drives the system's chromium; nothing is downloaded).
//
//   node console_check.js --url http://127.0.0.1:9644/ --chromium /usr/bin/chromium \
//     --topic orders --hw 0=200,1=120,2=0 --segments 0=0,52,104 \
//     --group console-group --lag 60 --records orders:0:5=o-0-5,o-0-6 --user-partitions 4 \
//     --screenshot-dir target/test-artifacts
//
// Prints one `PASS name` / `FAIL name: why` line per check and exits 0 only
// when every check passed. Bounded: every wait has a timeout and the whole
// run is abandoned after TOTAL_TIMEOUT_MS.
'use strict';

const path = require('path');
const fs = require('fs');
const puppeteer = require('puppeteer-core');

const TOTAL_TIMEOUT_MS = 55000;
const STEP_TIMEOUT_MS = 15000;

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i];
    const v = argv[i + 1];
    if (!k.startsWith('--') || v === undefined) {
      throw new Error(`bad argument list near ${k}`);
    }
    out[k.slice(2)] = v;
  }
  for (const need of ['url', 'chromium', 'topic', 'hw', 'segments', 'group', 'lag', 'records', 'user-partitions', 'screenshot-dir']) {
    if (!(need in out)) throw new Error(`--${need} is required`);
  }
  return out;
}

// "0=200,1=120" -> Map(0 => 200, 1 => 120)
function parseIntMap(s) {
  const m = new Map();
  for (const part of s.split(',').filter(Boolean)) {
    const [k, v] = part.split('=');
    m.set(Number(k), Number(v));
  }
  return m;
}

let failures = 0;
function pass(name) {
  console.log(`PASS ${name}`);
}
function fail(name, why) {
  failures++;
  console.log(`FAIL ${name}: ${why}`);
}
function check(name, ok, why) {
  if (ok) pass(name);
  else fail(name, why);
}

// "12,345" -> 12345; "–" -> null
function number(text) {
  const t = (text || '').replace(/[,\s]/g, '');
  return /^-?\d+$/.test(t) ? Number(t) : null;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const base = new URL(a.url);
  const expectHw = parseIntMap(a.hw);
  const [segPart, segList] = a.segments.split('=');
  const expectSegments = segList.split(',').map(Number);
  const expectLag = Number(a.lag);
  const [recTopic, recPart, recRest] = a.records.split(':');
  const [recOffset, recValues] = recRest.split('=');
  const expectValues = recValues.split(',');
  fs.mkdirSync(a['screenshot-dir'], { recursive: true });

  const browser = await puppeteer.launch({
    executablePath: a.chromium,
    headless: true,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
    timeout: STEP_TIMEOUT_MS,
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    page.setDefaultNavigationTimeout(STEP_TIMEOUT_MS);
    await page.setViewport({ width: 1280, height: 900 });

    // The console must work offline: anything not from the broker is refused
    // and reported.
    const foreign = [];
    const jsErrors = [];
    await page.setRequestInterception(true);
    page.on('request', (req) => {
      const u = new URL(req.url());
      if (u.protocol === 'data:' || u.origin === base.origin) {
        req.continue();
      } else {
        foreign.push(req.url());
        req.abort();
      }
    });
    page.on('pageerror', (e) => jsErrors.push(String(e)));
    page.on('console', (m) => {
      if (m.type() === 'error') jsErrors.push(m.text());
    });

    // 1. topics overview: the topic and its partitions with their HW
    await page.goto(base.href, { waitUntil: 'load' });
    const topicSel = `section.topic[data-topic="${a.topic}"]`;
    await page.waitForSelector(`${topicSel} tr.partition-row`);
    const title = await page.$eval(`${topicSel} .topic-head .name`, (el) => el.textContent);
    check('topic name shown', title === a.topic, `got ${JSON.stringify(title)}`);
    const rows = await page.$$eval(`${topicSel} tr.partition-row`, (trs) =>
      trs.map((tr) => ({
        partition: Number(tr.getAttribute('data-partition')),
        hw: tr.querySelector('td.hw').textContent,
        bar: !!tr.querySelector('.bar .live'),
      }))
    );
    check('one row per partition', rows.length === expectHw.size, `${rows.length} rows, expected ${expectHw.size}`);
    for (const [p, hw] of expectHw) {
      const row = rows.find((r) => r.partition === p);
      check(`partition ${p} high watermark ${hw}`, row && number(row.hw) === hw, row ? `shows ${JSON.stringify(row.hw)}` : 'no row');
      check(`partition ${p} has an offset bar`, row && row.bar, 'no bar');
    }
    await page.screenshot({ path: path.join(a['screenshot-dir'], 'console.png'), fullPage: true });

    // 1b. the summary cards count what the list shows: user topics only,
    // then every topic once "show internal topics" is ticked.
    const cardValue = (name) => page.$eval(`.card[data-card="${name}"] .v`, (el) => el.textContent);
    // The page re-renders after the switch: wait (bounded) for the count,
    // then the check below reads it either way.
    const partitionsCardShows = (want) =>
      page
        .waitForFunction(
          (n) => {
            const el = document.querySelector('.card[data-card="partitions"] .v');
            return el && el.textContent.replace(/[^0-9]/g, '') === String(n);
          },
          { timeout: STEP_TIMEOUT_MS },
          want
        )
        .catch(() => {});
    const userParts = Number(a['user-partitions']);
    const shownParts = number(await cardValue('partitions'));
    check(`summary counts ${userParts} user partitions`, shownParts === userParts, `shows ${shownParts}`);
    const shownTopicCount = number(await cardValue('topics'));
    const apiTopics = await page.evaluate(async () => (await (await fetch('/api/topics')).json()).topics);
    const userTopics = apiTopics.filter((t) => !t.internal);
    const userSegments = userTopics.reduce((x, t) => x + t.segment_count, 0);
    check('summary counts user topics', shownTopicCount === userTopics.length, `shows ${shownTopicCount}`);
    const shownSegments = number(await cardValue('segments'));
    check(`summary counts ${userSegments} user segments`, shownSegments === userSegments, `shows ${shownSegments}`);
    const allParts = apiTopics.reduce((x, t) => x + t.partition_count, 0);
    await page.click('#show-internal');
    await partitionsCardShows(allParts);
    const withInternal = number(await cardValue('partitions'));
    check(
      `with internal topics shown the summary counts all ${allParts} partitions`,
      withInternal === allParts && allParts > userParts,
      `shows ${withInternal}`
    );
    await page.click('#show-internal');
    await partitionsCardShows(userParts);

    // 2. topic page (by following the link): segment rows of one partition
    await page.click(`${topicSel} .topic-head .name a`);
    const segSel = `section.partition[data-partition="${segPart}"] tr.segment-row`;
    await page.waitForSelector(segSel);
    const bases = await page.$$eval(segSel, (trs) => trs.map((tr) => Number(tr.getAttribute('data-base-offset'))));
    check(
      `partition ${segPart} segment rows ${expectSegments.join(',')}`,
      JSON.stringify(bases) === JSON.stringify(expectSegments),
      `shows ${JSON.stringify(bases)}`
    );
    const segText = await page.$eval(segSel, (tr) => tr.textContent);
    check('segment row names its .log file', /\d{20}\.log/.test(segText), `row text ${JSON.stringify(segText)}`);
    await page.screenshot({ path: path.join(a['screenshot-dir'], 'console-topic.png'), fullPage: true });

    // 3. groups list, then the group page: total and per-partition lag
    await page.click('#nav a[data-view="groups"]');
    const groupRow = `tr.group-row[data-group="${a.group}"]`;
    await page.waitForSelector(groupRow);
    const listLag = await page.$eval(`${groupRow} td.lag`, (td) => td.textContent);
    check(`group list shows lag ${expectLag}`, number(listLag) === expectLag, `shows ${JSON.stringify(listLag)}`);
    await page.click(`${groupRow} a`);
    await page.waitForSelector('.group-detail .lag-total');
    const totalLag = await page.$eval('.group-detail .lag-total', (el) => el.textContent);
    check(`group page shows total lag ${expectLag}`, number(totalLag) === expectLag, `shows ${JSON.stringify(totalLag)}`);
    const partLags = await page.$$eval('.group-detail tr.offset-row td.lag', (tds) => tds.map((td) => td.textContent));
    const sum = partLags.reduce((acc, t) => acc + (number(t) || 0), 0);
    check('per-partition lags add up to the total', partLags.length > 0 && sum === expectLag, `rows ${JSON.stringify(partLags)}`);
    // the page polls the group: wait until the chart holds a second sample
    await page.waitForFunction(
      () => {
        const chart = document.querySelector('svg.lag-chart');
        return chart && Number(chart.getAttribute('data-samples')) >= 2 && chart.querySelector('polyline');
      },
      { timeout: STEP_TIMEOUT_MS }
    );
    pass('lag chart drawn and refreshed by polling');
    await page.screenshot({ path: path.join(a['screenshot-dir'], 'console-group.png'), fullPage: true });

    // 4. record browser
    const q = new URLSearchParams({ topic: recTopic, partition: recPart, offset: recOffset, limit: String(expectValues.length) });
    await page.evaluate((h) => {
      location.hash = h;
    }, `#/records?${q.toString()}`);
    await page.waitForSelector('tr.record-row');
    const recs = await page.$$eval('tr.record-row', (trs) =>
      trs.map((tr) => ({ offset: Number(tr.getAttribute('data-offset')), value: tr.children[3].textContent }))
    );
    const wantOffsets = expectValues.map((_, i) => Number(recOffset) + i);
    check(
      `records from offset ${recOffset}`,
      JSON.stringify(recs.map((r) => r.offset)) === JSON.stringify(wantOffsets),
      `offsets ${JSON.stringify(recs.map((r) => r.offset))}`
    );
    check(
      'record values shown',
      JSON.stringify(recs.map((r) => r.value)) === JSON.stringify(expectValues),
      `values ${JSON.stringify(recs.map((r) => r.value))}`
    );

    // 5. broker page: config table
    await page.click('#nav a[data-view="broker"]');
    await page.waitForSelector('tr.config-row[data-name="log.dirs"]');
    const configRows = await page.$$eval('tr.config-row', (trs) => trs.length);
    check('broker config table', configRows > 10, `${configRows} rows`);

    // 6. cluster page: a single node is the only broker and the controller,
    // and the topic's partitions name it as leader and only replica
    const nodeId = await page.evaluate(async () => (await (await fetch('/api/overview')).json()).node_id);
    await page.click('#nav a[data-view="cluster"]');
    await page.waitForSelector('tr.broker-row');
    const brokerRows = await page.$$eval('tr.broker-row', (trs) =>
      trs.map((tr) => ({
        id: Number(tr.getAttribute('data-broker')),
        controller: !!tr.querySelector('.pill.controller'),
        self: !!tr.querySelector('.pill.self'),
        leaders: tr.querySelector('td.leaders').textContent,
      }))
    );
    check(
      `cluster page lists broker ${nodeId} as controller and this broker`,
      brokerRows.length === 1 && brokerRows[0].id === nodeId && brokerRows[0].controller && brokerRows[0].self,
      JSON.stringify(brokerRows)
    );
    const allPartitions = apiTopics.reduce((x, t) => x + t.partition_count, 0);
    check(
      `broker ${nodeId} leads all ${allPartitions} partitions`,
      brokerRows.length === 1 && number(brokerRows[0].leaders) === allPartitions,
      JSON.stringify(brokerRows)
    );
    await page.screenshot({ path: path.join(a['screenshot-dir'], 'console-cluster.png'), fullPage: true });
    await page.click('#nav a[data-view="topics"]');
    await page.waitForSelector(`${topicSel} tr.partition-row td.leader`);
    const leadership = await page.$$eval(`${topicSel} tr.partition-row`, (trs) =>
      trs.map((tr) => [tr.querySelector('td.leader').textContent, tr.querySelector('td.replicas').textContent, tr.querySelector('td.isr').textContent])
    );
    check(
      'partition rows show this broker as leader, replica and ISR',
      leadership.length === expectHw.size && leadership.every((r) => r.every((x) => x === String(nodeId))),
      JSON.stringify(leadership)
    );

    check('no requests to other hosts', foreign.length === 0, foreign.join(', '));
    check('no JavaScript errors', jsErrors.length === 0, jsErrors.join(' | '));
  } finally {
    await browser.close();
  }
}

const watchdog = setTimeout(() => {
  fail('finished in time', `still running after ${TOTAL_TIMEOUT_MS} ms`);
  process.exit(1);
}, TOTAL_TIMEOUT_MS);

main()
  .catch((e) => fail('run', e && e.stack ? e.stack : String(e)))
  .finally(() => {
    clearTimeout(watchdog);
    process.exit(failures === 0 ? 0 : 1);
  });
