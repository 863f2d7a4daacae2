// weir console: a read-only single page over the broker's /api/ JSON.
// Plain JavaScript, no dependencies. Every piece of data is inserted with
// text nodes (textContent), never parsed as HTML.
'use strict';

(function () {
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const POLL_MS = 3000;
  const HISTORY_POINTS = 100;

  const main = document.getElementById('main');
  const statusLine = document.getElementById('status');
  const brokerLine = document.getElementById('broker-line');

  const state = {
    timer: null,
    routeId: 0,
    showInternal: false,
    // group id -> [{t, total, parts: {"topic/partition": lag}}], kept in the page only
    lagHistory: new Map(),
  };

  // ------------------------------------------------------------ DOM helpers

  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.setAttribute('class', v);
      else if (k === 'style') Object.assign(el.style, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'value') el.value = v;
      else el.setAttribute(k, String(v));
    }
  }

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    return append(el, children);
  }

  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG_NS, tag);
    setAttrs(el, attrs);
    return append(el, children);
  }

  function link(hash, text) {
    return h('a', { href: hash }, text);
  }

  // -------------------------------------------------------------- formatting

  const nf = new Intl.NumberFormat('en-US');
  function num(n) {
    return n === null || n === undefined ? '–' : nf.format(n);
  }
  function bytes(n) {
    if (n === null || n === undefined) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = n;
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return (i === 0 ? String(v) : v.toFixed(v < 10 ? 2 : 1)) + ' ' + units[i];
  }
  function time(ms) {
    if (ms === null || ms === undefined || ms < 0) return '–';
    const d = new Date(ms);
    return isNaN(d.getTime()) ? String(ms) : d.toISOString().replace('T', ' ').replace('Z', ' UTC');
  }
  function clock(ms) {
    return new Date(ms).toISOString().slice(11, 19);
  }
  function duration(ms) {
    let sec = Math.floor(ms / 1000);
    const d = Math.floor(sec / 86400);
    sec %= 86400;
    const hh = Math.floor(sec / 3600);
    sec %= 3600;
    const mm = Math.floor(sec / 60);
    sec %= 60;
    if (d) return `${d}d ${hh}h`;
    if (hh) return `${hh}h ${mm}m`;
    if (mm) return `${mm}m ${sec}s`;
    return `${sec}s`;
  }
  const enc = encodeURIComponent;

  // --------------------------------------------------------------------- API

  async function api(path) {
    const r = await fetch(path, { cache: 'no-store', headers: { Accept: 'application/json' } });
    let body = null;
    try {
      body = await r.json();
    } catch (_) {
      body = null;
    }
    if (!r.ok) {
      throw new Error(body && body.error ? body.error : `${r.status} ${r.statusText}`);
    }
    return body;
  }

  function setStatus(text, bad) {
    statusLine.textContent = text;
    statusLine.className = bad ? 'error' : 'muted';
  }

  async function refreshBrokerLine() {
    try {
      const o = await api('/api/overview');
      const parts = [`broker ${o.node_id}`, `weir ${o.version}`, o.listener];
      if (o.brokers > 1) parts.push(`${o.brokers} brokers`);
      if (typeof o.uptime_ms === 'number') parts.push(`up ${duration(o.uptime_ms)}`);
      brokerLine.textContent = parts.join(' · ');
      return o;
    } catch (e) {
      brokerLine.textContent = 'broker unreachable';
      return null;
    }
  }

  // ------------------------------------------------------------- components

  // A partition's offsets to scale: [0, logStart) deleted, [logStart, HW)
  // readable, [HW, LEO) written but not yet visible to consumers.
  function offsetBar(p, scale, opts) {
    const o = opts || {};
    const pct = (v) => `${Math.max(0, Math.min(100, (v / scale) * 100))}%`;
    const bar = h('div', {
      class: 'bar',
      role: 'img',
      'aria-label': `log start ${p.log_start_offset}, high watermark ${p.high_watermark}, log end ${p.log_end_offset}`,
      title: `log start ${num(p.log_start_offset)} · HW ${num(p.high_watermark)} · LEO ${num(p.log_end_offset)}`,
    });
    append(bar, [
      h('span', { class: 'gone', style: { left: '0', width: pct(p.log_start_offset) } }),
      h('span', {
        class: 'live',
        style: { left: pct(p.log_start_offset), width: pct(p.high_watermark - p.log_start_offset) },
      }),
      h('span', {
        class: 'pending',
        style: { left: pct(p.high_watermark), width: pct(p.log_end_offset - p.high_watermark) },
      }),
    ]);
    for (const base of o.ticks || []) {
      if (base > 0) bar.appendChild(h('span', { class: 'tick', style: { left: pct(base) } }));
    }
    if (typeof o.committed === 'number') {
      bar.appendChild(h('span', { class: 'committed', style: { left: pct(o.committed) } }));
    }
    return bar;
  }

  function legend(extra) {
    return h(
      'div',
      { class: 'legend' },
      h('span', null, h('i', { class: 'gone' }), 'deleted (below log start)'),
      h('span', null, h('i', { class: 'live' }), 'readable (log start → high watermark)'),
      h('span', null, h('i', { class: 'pending' }), 'not yet visible (HW → log end)'),
      extra || []
    );
  }

  function card(k, v, cls) {
    return h(
      'div',
      { class: 'card', 'data-card': k.toLowerCase() },
      h('div', { class: 'k' }, k),
      h('div', { class: 'v ' + (cls || '') }, v)
    );
  }

  function table(headers, rows, attrs) {
    return h(
      'table',
      attrs || null,
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          headers.map((c) => (typeof c === 'string' ? h('th', null, c) : h('th', { class: c.cls }, c.text)))
        )
      ),
      h('tbody', null, rows)
    );
  }

  function shown(v) {
    if (v === null || v === undefined) return h('span', { class: 'null' }, 'null');
    return h(
      'span',
      null,
      h('span', { class: 'mono' }, v.data),
      v.encoding !== 'utf8' ? h('span', { class: 'enc' }, v.encoding) : null,
      v.truncated ? h('span', { class: 'cut' }, `(${num(v.size)} bytes, cut)`) : null
    );
  }

  // Replica ids in order: the leader bold, replicas out of the ISR marked,
  // offline replicas highlighted; each id says why in its tooltip.
  function replicaList(p, ids) {
    if (!ids || ids.length === 0) return h('span', { class: 'muted' }, '–');
    return h(
      'span',
      { class: 'replicas' },
      ids.map((id, i) => {
        const offline = (p.offline_replicas || []).includes(id);
        const outOfSync = !(p.isr || []).includes(id);
        const cls = ['replica'];
        const why = [`broker ${id}`];
        if (id === p.leader) {
          cls.push('leader');
          why.push('leader');
        }
        if (offline) {
          cls.push('offline-replica');
          why.push('offline');
        } else if (outOfSync) {
          cls.push('out-of-sync');
          why.push('not in sync');
        }
        return [i ? ', ' : null, h('span', { class: cls.join(' '), 'data-replica': id, title: why.join(', ') }, String(id))];
      })
    );
  }

  function leaderCell(p) {
    if (p.leader < 0) return h('span', { class: 'pill offline leader-none' }, p.replicas.length ? 'none' : 'unknown');
    return h('span', { class: 'mono', title: `leader epoch ${p.leader_epoch}` }, String(p.leader));
  }

  // A partition whose log is on other brokers: no offsets here.
  function elsewhere(p) {
    const on = p.replicas.length ? ` (replicas on broker${p.replicas.length === 1 ? '' : 's'} ${p.replicas.join(', ')})` : '';
    return h('span', { class: 'muted not-local' }, `not hosted on this broker${on}`);
  }

  // The followers of a partition this broker leads, as the leader sees them.
  function followersTable(p) {
    if (!p.followers || p.followers.length === 0) return null;
    const rows = p.followers.map((f) =>
      h(
        'tr',
        { class: 'follower-row', 'data-replica': f.replica },
        h('td', { class: 'num' }, String(f.replica)),
        h('td', null, f.in_isr ? 'yes' : h('span', { class: 'out-of-sync' }, 'no')),
        h('td', { class: 'num' }, num(f.log_end_offset)),
        h('td', { class: 'num lag-messages' }, num(f.lag_messages)),
        h('td', { class: 'num lag-ms', title: f.lag_ms === null ? 'not caught up since this broker leads' : null }, f.lag_ms === null ? '–' : `${num(f.lag_ms)} ms`)
      )
    );
    return table(
      [
        { text: 'Follower', cls: 'num' },
        'In sync',
        { text: 'LEO', cls: 'num' },
        { text: 'Lag (messages)', cls: 'num' },
        { text: 'Since caught up', cls: 'num' },
      ],
      rows,
      { class: 'followers' }
    );
  }

  function errorPanel(e) {
    return h('div', { class: 'panel error' }, String(e && e.message ? e.message : e));
  }

  // ------------------------------------------------------------------ views

  async function topicsView() {
    const [data, overview] = await Promise.all([api('/api/topics'), refreshBrokerLine()]);
    const root = h('div', null, h('h1', null, 'Topics'));
    const user = data.topics.filter((t) => !t.internal);
    // The summary counts what the list shows: internal topics only when
    // they are shown.
    const shownTopics = state.showInternal ? data.topics : user;
    const sum = (f) => shownTopics.reduce((a, t) => a + f(t), 0);
    append(root, [
      h(
        'div',
        { class: 'cards' },
        card('Topics', num(shownTopics.length)),
        card('Partitions', num(sum((t) => t.partition_count))),
        card('Size on disk', bytes(sum((t) => t.size_bytes))),
        card('Segments', num(sum((t) => t.segment_count))),
        overview ? card('Consumer groups', num(overview.groups)) : null
      ),
      h(
        'label',
        { class: 'muted' },
        h('input', {
          type: 'checkbox',
          id: 'show-internal',
          checked: state.showInternal ? 'checked' : null,
          onchange: (ev) => {
            state.showInternal = ev.target.checked;
            route();
          },
        }),
        ' show internal topics'
      ),
      legend(),
    ]);
    if (shownTopics.length === 0) {
      root.appendChild(h('p', { class: 'muted' }, 'No topics yet.'));
    }
    for (const t of shownTopics) {
      root.appendChild(topicPanel(t));
    }
    return root;
  }

  // Damaged segments of a partition (reads stop before the damage and
  // answer CORRUPT_MESSAGE at it): a pill whose tooltip says where.
  function damagePill(p) {
    const d = p.damage || [];
    if (d.length === 0) return null;
    const where = d
      .map((x) => `segment ${x.segment_base_offset}: from offset ${x.offset} (byte ${x.position}): ${x.reason}`)
      .join('\n');
    return h('span', { class: 'pill offline damaged', title: where }, 'damaged');
  }

  function topicPanel(t) {
    const scale = Math.max(1, ...t.partitions.map((p) => p.log_end_offset || 0));
    const overrides = Object.entries(t.config_overrides || {});
    // records can be read only from partitions whose log is here
    const firstLocal = t.partitions.find((p) => p.local && p.online);
    const rows = t.partitions.map((p) =>
      h(
        'tr',
        { class: 'partition-row', 'data-topic': t.name, 'data-partition': p.partition },
        h(
          'td',
          { class: 'num' },
          p.partition,
          p.online ? null : h('span', { class: 'pill offline' }, 'offline'),
          damagePill(p)
        ),
        h('td', { class: 'leader' }, leaderCell(p)),
        h('td', { class: 'replicas' }, replicaList(p, p.replicas)),
        h('td', { class: 'isr' }, replicaList(p, p.isr)),
        h('td', { class: 'bar-cell' }, p.local ? offsetBar(p, scale) : elsewhere(p)),
        h('td', { class: 'num log-start' }, num(p.log_start_offset)),
        h('td', { class: 'num hw' }, num(p.high_watermark)),
        h('td', { class: 'num leo' }, num(p.log_end_offset)),
        h('td', { class: 'num' }, bytes(p.size_bytes)),
        h('td', { class: 'num' }, num(p.segment_count))
      )
    );
    return h(
      'section',
      { class: 'panel topic', 'data-topic': t.name },
      h(
        'div',
        { class: 'topic-head' },
        h('span', { class: 'name' }, link(`#/topics/${enc(t.name)}`, t.name)),
        t.internal ? h('span', { class: 'pill' }, 'internal') : null,
        h('span', { class: 'pill' }, `${t.partition_count} partition${t.partition_count === 1 ? '' : 's'}`),
        h('span', { class: 'pill' }, bytes(t.size_bytes)),
        h('span', { class: 'pill' }, `${num(t.segment_count)} segment${t.segment_count === 1 ? '' : 's'}`),
        overrides.map(([k, v]) => h('span', { class: 'pill mono' }, `${k}=${v}`)),
        firstLocal ? link(`#/records?topic=${enc(t.name)}&partition=${firstLocal.partition}`, 'browse records →') : null
      ),
      table(
        [
          'Partition',
          'Leader',
          'Replicas',
          'ISR',
          'Offsets (to scale)',
          { text: 'Log start', cls: 'num' },
          { text: 'High watermark', cls: 'num' },
          { text: 'Log end', cls: 'num' },
          { text: 'Size', cls: 'num' },
          { text: 'Segments', cls: 'num' },
        ],
        rows,
        { class: 'partitions' }
      )
    );
  }

  async function topicView(name) {
    const t = await api(`/api/topics/${enc(name)}`);
    refreshBrokerLine();
    const scale = Math.max(1, ...t.partitions.map((p) => p.log_end_offset || 0));
    const root = h(
      'div',
      { class: 'topic-detail', 'data-topic': t.name },
      h('p', { class: 'sub' }, link('#/', '← all topics')),
      h('h1', null, t.name),
      h('p', { class: 'sub mono' }, `topic id ${t.id}`),
      h(
        'div',
        { class: 'cards' },
        card('Partitions', num(t.partition_count)),
        card('Size on disk', bytes(t.size_bytes)),
        card('Segments', num(t.partitions.reduce((a, p) => a + p.segments.length, 0)))
      ),
      legend(h('span', null, h('i', { class: 'tick' }), 'segment boundary'))
    );
    for (const p of t.partitions) {
      const segRows = p.segments.map((sg) =>
        h(
          'tr',
          { class: 'segment-row', 'data-partition': p.partition, 'data-base-offset': sg.base_offset },
          h('td', { class: 'num' }, num(sg.base_offset)),
          h(
            'td',
            { class: 'mono' },
            sg.file,
            sg.active ? h('span', { class: 'pill' }, 'active') : null,
            (p.damage || [])
              .filter((x) => x.segment_base_offset === sg.base_offset)
              .map((x) =>
                h('span', { class: 'pill offline damaged', title: x.reason }, `damaged from offset ${num(x.offset)}`)
              )
          ),
          h('td', { class: 'num' }, bytes(sg.log_bytes)),
          h('td', { class: 'num' }, bytes(sg.index_bytes)),
          h('td', { class: 'num' }, bytes(sg.timeindex_bytes))
        )
      );
      root.appendChild(
        h(
          'section',
          { class: 'panel partition', 'data-partition': p.partition },
          h(
            'div',
            { class: 'topic-head' },
            h('span', { class: 'name' }, `Partition ${p.partition}`),
            p.online ? null : h('span', { class: 'pill offline' }, 'offline'),
            damagePill(p),
            p.local ? h('span', { class: 'pill' }, `log start ${num(p.log_start_offset)}`) : null,
            p.local ? h('span', { class: 'pill' }, `HW ${num(p.high_watermark)}`) : null,
            p.local ? h('span', { class: 'pill' }, `LEO ${num(p.log_end_offset)}`) : null,
            p.local ? h('span', { class: 'pill' }, bytes(p.size_bytes)) : null,
            p.local ? link(`#/records?topic=${enc(t.name)}&partition=${p.partition}`, 'browse records →') : null
          ),
          h(
            'p',
            { class: 'leadership' },
            'leader ',
            leaderCell(p),
            p.leader_epoch >= 0 ? h('span', { class: 'muted' }, ` (epoch ${p.leader_epoch})`) : null,
            ' · replicas ',
            replicaList(p, p.replicas),
            ' · in sync ',
            replicaList(p, p.isr),
            p.offline_replicas.length ? [' · offline ', replicaList(p, p.offline_replicas)] : null
          ),
          followersTable(p),
          p.local
            ? h('div', { style: { margin: '10px 0' } }, offsetBar(p, scale, { ticks: p.segments.map((sg) => sg.base_offset) }))
            : h('p', null, elsewhere(p)),
          p.dir ? h('p', { class: 'muted mono' }, p.dir) : null,
          p.local ? table(
            [
              { text: 'Base offset', cls: 'num' },
              'Segment',
              { text: '.log', cls: 'num' },
              { text: '.index', cls: 'num' },
              { text: '.timeindex', cls: 'num' },
            ],
            segRows,
            { class: 'segments' }
          ) : null
        )
      );
    }
    const cfgRows = t.configs.map((c) =>
      h(
        'tr',
        { class: c.source === 'DYNAMIC_TOPIC_CONFIG' ? 'override' : null },
        h('td', { class: 'mono' }, c.name),
        h('td', { class: 'mono wrap' }, c.sensitive ? '(sensitive)' : c.value === null ? h('span', { class: 'null' }, 'null') : c.value),
        h('td', null, h('span', { class: 'pill' }, c.source))
      )
    );
    root.appendChild(
      h(
        'section',
        { class: 'panel' },
        h('h2', null, 'Configuration'),
        t.hosted
          ? table(['Name', 'Value', 'Source'], cfgRows)
          : h('p', { class: 'muted' }, 'This broker hosts no partition of this topic; its configuration is known to the brokers that do.')
      )
    );
    return root;
  }

  async function groupsView() {
    const data = await api('/api/groups');
    refreshBrokerLine();
    const rows = data.groups.map((g) =>
      h(
        'tr',
        { class: 'group-row', 'data-group': g.group_id },
        h('td', null, link(`#/groups/${enc(g.group_id)}`, g.group_id)),
        h('td', null, h('span', { class: `pill state-${g.state}` }, g.state)),
        h('td', null, g.group_type || 'classic'),
        h('td', null, g.protocol_type || '–', g.protocol ? ` / ${g.protocol}` : ''),
        h('td', { class: 'num' }, num(g.members)),
        h('td', { class: 'num' }, num(g.partitions)),
        h('td', { class: `num lag ${g.total_lag > 0 ? 'lag-pos' : 'lag-zero'}` }, num(g.total_lag))
      )
    );
    return h(
      'div',
      null,
      h('h1', null, 'Consumer groups'),
      h('p', { class: 'sub' }, 'Lag per partition is high watermark − committed offset.'),
      rows.length
        ? h(
            'section',
            { class: 'panel' },
            table(
              [
                'Group',
                'State',
                'Type',
                'Protocol',
                { text: 'Members', cls: 'num' },
                { text: 'Partitions', cls: 'num' },
                { text: 'Total lag', cls: 'num' },
              ],
              rows
            )
          )
        : h('p', { class: 'muted' }, 'No consumer groups yet.')
    );
  }

  function remember(id, t, total, parts) {
    let hist = state.lagHistory.get(id);
    if (!hist) {
      hist = [];
      state.lagHistory.set(id, hist);
    }
    const last = hist[hist.length - 1];
    if (last && last.t === t) return hist;
    hist.push({ t, total, parts });
    if (hist.length > HISTORY_POINTS) hist.splice(0, hist.length - HISTORY_POINTS);
    return hist;
  }

  function lagChart(hist) {
    const W = 720;
    const H = 160;
    const L = 56;
    const R = 12;
    const T = 12;
    const B = 24;
    const chart = s('svg', { class: 'chart lag-chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'data-samples': hist.length });
    const max = Math.max(1, ...hist.map((p) => p.total));
    const t0 = hist[0].t;
    const t1 = Math.max(t0 + 1, hist[hist.length - 1].t);
    const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
    const y = (v) => T + (1 - v / max) * (H - T - B);
    for (const frac of [0, 0.5, 1]) {
      const v = Math.round(max * frac);
      append(chart, [
        s('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }),
        s('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, num(v)),
      ]);
    }
    append(chart, [
      s('text', { x: L, y: H - 6 }, clock(t0)),
      s('text', { x: W - R, y: H - 6, 'text-anchor': 'end' }, clock(t1)),
    ]);
    const pts = hist.map((p) => [x(p.t), y(p.total)]);
    if (pts.length === 1) pts.push([W - R, pts[0][1]]);
    const line = pts.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(' ');
    append(chart, [
      s('polygon', { class: 'area', points: `${L},${y(0)} ${line} ${pts[pts.length - 1][0].toFixed(1)},${y(0)}` }),
      s('polyline', { class: 'line', points: line }),
    ]);
    chart.appendChild(s('title', null, 'total lag over time'));
    return chart;
  }

  async function groupView(id) {
    const g = await api(`/api/groups/${enc(id)}`);
    refreshBrokerLine();
    const parts = {};
    for (const o of g.offsets) parts[`${o.topic}/${o.partition}`] = o.lag;
    const hist = remember(g.group_id, g.now_ms, g.total_lag, parts);
    const memberRows = g.members.map((m) =>
      h(
        'tr',
        { class: 'member-row' },
        h('td', { class: 'mono wrap' }, m.member_id),
        h('td', null, m.client_id),
        h('td', { class: 'mono' }, m.client_host),
        h('td', null, m.group_instance_id || '–'),
        h(
          'td',
          { class: 'mono' },
          m.assignment
            ? m.assignment.map((a) => h('div', null, `${a.topic}: ${a.partitions.join(', ')}`))
            : m.assignment_bytes
              ? `${m.assignment_bytes} bytes`
              : '–'
        ),
        h(
          'td',
          { class: 'mono' },
          m.member_epoch !== undefined
            ? `epoch ${m.member_epoch} · ${m.member_state}` +
                (m.target_assignment && m.target_assignment.length
                  ? ' · target ' + m.target_assignment.map((a) => `${a.topic}: ${a.partitions.join(', ')}`).join('; ')
                  : '')
            : '–'
        )
      )
    );
    const offsetRows = g.offsets.map((o) => {
      const p = {
        log_start_offset: 0,
        high_watermark: o.high_watermark === null ? 0 : o.high_watermark,
        log_end_offset: o.log_end_offset === null ? 0 : o.log_end_offset,
      };
      const scale = Math.max(1, p.log_end_offset, o.committed_offset);
      return h(
        'tr',
        { class: 'offset-row', 'data-topic': o.topic, 'data-partition': o.partition },
        h('td', null, link(`#/topics/${enc(o.topic)}`, o.topic)),
        h('td', { class: 'num' }, o.partition),
        h('td', { class: 'num committed' }, num(o.committed_offset)),
        h('td', { class: 'num hw' }, num(o.high_watermark)),
        h('td', { class: `num lag ${o.lag > 0 ? 'lag-pos' : 'lag-zero'}` }, num(o.lag)),
        h('td', { class: 'bar-cell' }, offsetBar(p, scale, { committed: o.committed_offset }))
      );
    });
    return h(
      'div',
      { class: 'group-detail', 'data-group': g.group_id },
      h('p', { class: 'sub' }, link('#/groups', '← all groups')),
      h('h1', null, g.group_id),
      h(
        'p',
        { class: 'sub' },
        h('span', { class: `pill state-${g.state}` }, g.state),
        ' ',
        g.protocol_type ? `${g.protocol_type}${g.protocol ? ' / ' + g.protocol : ''}` : 'no protocol',
        g.group_type === 'consumer'
          ? ` · group epoch ${g.group_epoch} · assignment epoch ${g.assignment_epoch}`
          : g.generation !== null
            ? ` · generation ${g.generation}`
            : '',
        ` · coordinator partition ${g.coordinator_partition}`
      ),
      h(
        'div',
        { class: 'cards' },
        card('Total lag', num(g.total_lag), `lag-total ${g.total_lag > 0 ? 'lag-pos' : 'lag-zero'}`),
        card('Members', num(g.members.length)),
        card('Partitions with commits', num(g.offsets.length))
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', null, 'Total lag over time'),
        h('p', { class: 'muted' }, `sampled every ${POLL_MS / 1000} s while this page is open (${hist.length} point${hist.length === 1 ? '' : 's'})`),
        lagChart(hist)
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', null, 'Members'),
        memberRows.length
          ? table(['Member id', 'Client id', 'Host', 'Instance id', 'Assignment', 'Epoch (KIP-848)'], memberRows)
          : h('p', { class: 'muted' }, 'No members (the group is empty).')
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', null, 'Committed offsets and lag'),
        offsetRows.length
          ? table(
              [
                'Topic',
                { text: 'Partition', cls: 'num' },
                { text: 'Committed', cls: 'num' },
                { text: 'High watermark', cls: 'num' },
                { text: 'Lag', cls: 'num' },
                'Position in the log',
              ],
              offsetRows,
              { class: 'offsets' }
            )
          : h('p', { class: 'muted' }, 'No committed offsets.'),
        legend(h('span', null, h('i', { class: 'committed' }), 'committed offset'))
      )
    );
  }

  // The transactional ids this broker coordinates: open transactions first
  // (oldest first), then the others by id.
  async function transactionsView() {
    const data = await api('/api/transactions');
    refreshBrokerLine();
    const k = data.counts;
    const open = (t) => t.open_age_ms !== null;
    // a transaction open for more than its timeout is about to be aborted
    const late = (t) => open(t) && t.open_age_ms > t.timeout_ms;
    const rows = data.transactions.map((t) =>
      h(
        'tr',
        { class: 'txn-row', 'data-transactional-id': t.transactional_id },
        h('td', { class: 'mono wrap' }, t.transactional_id),
        h(
          'td',
          null,
          h('span', { class: `pill state-${t.state}` }, t.state),
          t.pending_state ? h('span', { class: 'pill pending-state', title: 'being written to __transaction_state' }, `→ ${t.pending_state}`) : null
        ),
        h('td', { class: 'num' }, String(t.producer_id)),
        h('td', { class: 'num' }, String(t.producer_epoch)),
        h('td', { class: 'num' }, duration(t.timeout_ms)),
        h(
          'td',
          { class: 'mono wrap txn-partitions' },
          t.partitions.length
            ? t.partitions.map((p, i) => [i ? ', ' : null, link(`#/topics/${enc(p.topic)}`, `${p.topic}-${p.partition}`)])
            : h('span', { class: 'muted' }, '–')
        ),
        h(
          'td',
          { class: `num open-age ${late(t) ? 'lag-pos' : ''}`, title: t.start_ms === null ? 'no transaction yet' : `started ${time(t.start_ms)}` },
          open(t) ? duration(t.open_age_ms) : '–'
        ),
        h('td', { class: 'num' }, t.coordinator_partition)
      )
    );
    const coordinated = data.coordinated_partitions;
    return h(
      'div',
      { class: 'transactions' },
      h('h1', null, 'Transactions'),
      h(
        'p',
        { class: 'sub' },
        coordinated.length
          ? `Transactional ids of the __transaction_state partition${coordinated.length === 1 ? '' : 's'} this broker leads (${coordinated.join(', ')}).`
          : 'This broker leads no __transaction_state partition (or the topic does not exist yet).',
        data.loading_partitions.length ? ` Loading partition${data.loading_partitions.length === 1 ? '' : 's'} ${data.loading_partitions.join(', ')}.` : ''
      ),
      h(
        'div',
        { class: 'cards' },
        card('Transactional ids', num(k.transactional_ids)),
        card('Open', num(k.open)),
        card('Oldest open', k.open ? duration(k.oldest_open_age_ms) : '–'),
        card('Writing markers', num(k.completing)),
        card('Committed', num(k.committed)),
        card('Aborted', num(k.aborted)),
        card('Timed out', num(k.timed_out), k.timed_out ? 'lag-pos' : '')
      ),
      rows.length
        ? h(
            'section',
            { class: 'panel' },
            table(
              [
                'Transactional id',
                'State',
                { text: 'Producer id', cls: 'num' },
                { text: 'Epoch', cls: 'num' },
                { text: 'Timeout', cls: 'num' },
                'Partitions',
                { text: 'Open for', cls: 'num' },
                { text: 'Log partition', cls: 'num' },
              ],
              rows,
              { class: 'txns' }
            ),
            data.total > data.transactions.length ? h('p', { class: 'muted' }, `showing ${num(data.transactions.length)} of ${num(data.total)}`) : null
          )
        : h('p', { class: 'muted' }, 'No transactional ids here.')
    );
  }

  async function recordsView(params) {
    const topics = await api('/api/topics');
    refreshBrokerLine();
    const topic = params.get('topic') || (topics.topics.find((t) => !t.internal) || {}).name || '';
    const mode = params.has('timestamp') ? 'timestamp' : params.has('offset') ? 'offset' : 'earliest';
    const form = h(
      'form',
      { class: 'records panel' },
      h(
        'label',
        null,
        'Topic',
        h(
          'select',
          { name: 'topic' },
          topics.topics.map((t) => h('option', { value: t.name, selected: t.name === topic ? 'selected' : null }, t.name))
        )
      ),
      h('label', null, 'Partition', h('input', { type: 'number', name: 'partition', min: '0', value: params.get('partition') || '0' })),
      h(
        'label',
        null,
        'From',
        h(
          'select',
          { name: 'mode' },
          [
            ['earliest', 'log start'],
            ['offset', 'offset'],
            ['timestamp', 'timestamp (ms)'],
          ].map(([v, text]) => h('option', { value: v, selected: v === mode ? 'selected' : null }, text))
        )
      ),
      h('label', null, 'Offset', h('input', { type: 'number', name: 'offset', min: '0', value: params.get('offset') || '' })),
      h('label', null, 'Timestamp (ms)', h('input', { type: 'number', name: 'timestamp', min: '0', value: params.get('timestamp') || '' })),
      h('label', null, 'Limit (≤ 500)', h('input', { type: 'number', name: 'limit', min: '1', max: '500', value: params.get('limit') || '50' })),
      h('button', { type: 'submit' }, 'Read')
    );
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const f = new FormData(form);
      const q = new URLSearchParams();
      q.set('topic', f.get('topic') || '');
      q.set('partition', f.get('partition') || '0');
      const m = f.get('mode');
      if (m === 'offset') q.set('offset', f.get('offset') || '0');
      if (m === 'timestamp') q.set('timestamp', f.get('timestamp') || '0');
      q.set('limit', f.get('limit') || '50');
      location.hash = `#/records?${q.toString()}`;
    });
    const root = h('div', null, h('h1', null, 'Records'), h('p', { class: 'sub' }, 'Reads like a consumer: only below the high watermark.'), form);
    if (!topic || !params.has('topic')) return root;
    const q = new URLSearchParams();
    for (const k of ['topic', 'partition', 'offset', 'timestamp', 'limit']) {
      if (params.get(k)) q.set(k, params.get(k));
    }
    let page;
    try {
      page = await api(`/api/records?${q.toString()}`);
    } catch (e) {
      root.appendChild(errorPanel(e));
      return root;
    }
    // a batch that could not be read is one row with its offsets and the reason
    const errorRow = (r) =>
      h(
        'tr',
        { class: 'record-error', 'data-offset': r.offset },
        h('td', { class: 'num' }, r.last_offset !== null && r.last_offset !== r.offset ? `${num(r.offset)}–${num(r.last_offset)}` : num(r.offset)),
        h('td', { class: 'error', colspan: '4' }, `unreadable: ${r.error}`)
      );
    const rows = page.records.map((r) =>
      typeof r.error === 'string' ? errorRow(r) : h(
        'tr',
        { class: 'record-row', 'data-offset': r.offset },
        h('td', { class: 'num' }, num(r.offset)),
        h('td', { class: 'mono', title: r.timestamp_type }, time(r.timestamp)),
        h('td', { class: 'wrap' }, shown(r.key)),
        h('td', { class: 'wrap' }, shown(r.value)),
        h(
          'td',
          { class: 'wrap' },
          r.headers.length ? r.headers.map((hd) => h('div', null, h('span', { class: 'mono' }, hd.key), ': ', shown(hd.value))) : '–'
        )
      )
    );
    const bad = page.records.filter((r) => typeof r.error === 'string').length;
    const good = page.records.length - bad;
    const next = new URLSearchParams(q);
    next.delete('timestamp');
    next.set('offset', String(page.next_offset));
    append(root, [
      h(
        'section',
        { class: 'panel' },
        h(
          'p',
          { class: 'muted' },
          `${page.topic}-${page.partition}: log start ${num(page.log_start_offset)}, high watermark ${num(page.high_watermark)}; `,
          `${good} record${good === 1 ? '' : 's'} from offset ${num(page.start_offset)} (limit ${page.limit})`,
          bad ? `; ${bad} unreadable batch${bad === 1 ? '' : 'es'}` : ''
        ),
        rows.length ? table([{ text: 'Offset', cls: 'num' }, 'Timestamp', 'Key', 'Value', 'Headers'], rows, { class: 'records' }) : h('p', { class: 'muted' }, 'No records here.'),
        page.next_offset < page.high_watermark ? h('p', null, link(`#/records?${next.toString()}`, `next page from offset ${num(page.next_offset)} →`)) : null
      ),
    ]);
    return root;
  }

  async function clusterView() {
    const [c, data] = await Promise.all([api('/api/cluster'), api('/api/topics'), refreshBrokerLine()]);
    const parts = data.topics.flatMap((t) => t.partitions.map((p) => Object.assign({ topic: t.name }, p)));
    const offline = parts.filter((p) => p.leader < 0);
    const under = parts.filter((p) => p.leader >= 0 && p.isr.length < p.replicas.length);
    const count = (id, f) => parts.filter((p) => f(p, id)).length;
    const rows = c.brokers.map((b) =>
      h(
        'tr',
        { class: 'broker-row', 'data-broker': b.id },
        h('td', { class: 'num' }, String(b.id)),
        h('td', { class: 'mono' }, `${b.host}:${b.port}`),
        h('td', null, b.rack === null ? h('span', { class: 'null' }, 'none') : b.rack),
        h(
          'td',
          null,
          b.is_controller ? h('span', { class: 'pill controller' }, 'controller') : null,
          b.is_self ? h('span', { class: 'pill self' }, 'this broker') : null
        ),
        h('td', { class: 'num leaders' }, num(count(b.id, (p, id) => p.leader === id))),
        h('td', { class: 'num replica-count' }, num(count(b.id, (p, id) => p.replicas.includes(id))))
      )
    );
    const attention = [...offline, ...under].map((p) =>
      h(
        'tr',
        { class: 'attention-row', 'data-topic': p.topic, 'data-partition': p.partition },
        h('td', null, link(`#/topics/${enc(p.topic)}`, p.topic)),
        h('td', { class: 'num' }, p.partition),
        h('td', null, leaderCell(p)),
        h('td', null, replicaList(p, p.replicas)),
        h('td', null, replicaList(p, p.isr))
      )
    );
    return h(
      'div',
      { class: 'cluster' },
      h('h1', null, 'Cluster'),
      h('p', { class: 'sub' }, 'Live brokers and partition leadership as this broker’s metadata shows them.'),
      h(
        'div',
        { class: 'cards' },
        card('Brokers', num(c.brokers.length)),
        card('Controller', c.controller_id < 0 ? 'none' : String(c.controller_id), c.controller_id < 0 ? 'error' : ''),
        card('Partitions', num(parts.length)),
        card('Offline partitions', num(offline.length), offline.length ? 'lag-pos' : 'lag-zero'),
        card('Under-replicated', num(under.length), under.length ? 'lag-pos' : 'lag-zero')
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', null, 'Brokers'),
        table(
          [
            { text: 'Id', cls: 'num' },
            'Address',
            'Rack',
            'Role',
            { text: 'Leader of', cls: 'num' },
            { text: 'Replicas', cls: 'num' },
          ],
          rows,
          { class: 'brokers' }
        )
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', null, 'Partitions without a leader or out of sync'),
        attention.length
          ? table(['Topic', { text: 'Partition', cls: 'num' }, 'Leader', 'Replicas', 'ISR'], attention, { class: 'attention' })
          : h('p', { class: 'muted' }, 'Every partition has a leader and a full ISR.')
      )
    );
  }

  async function brokerView() {
    const [o, cfg] = await Promise.all([refreshBrokerLine(), api('/api/config')]);
    const root = h('div', null, h('h1', null, 'Broker'));
    if (o) {
      append(root, [
        h(
          'div',
          { class: 'cards' },
          card('Node id', String(o.node_id)),
          card('Version', o.version),
          card('Listener', o.listener),
          typeof o.uptime_ms === 'number' ? card('Uptime', duration(o.uptime_ms)) : null,
          card('Partitions', num(o.partitions)),
          card('Offline partitions', num(o.offline_partitions)),
          card('Size on disk', bytes(o.size_bytes))
        ),
        h('p', { class: 'muted' }, `cluster id ${o.cluster_id} · data dir${o.data_dirs.length === 1 ? '' : 's'} ${o.data_dirs.join(', ')}`),
      ]);
    }
    const filter = h('input', { type: 'search', class: 'filter', placeholder: 'filter settings…' });
    const rows = cfg.configs.map((c) =>
      h(
        'tr',
        { class: 'config-row', 'data-name': c.name },
        h('td', { class: 'mono' }, c.name),
        h('td', { class: 'mono wrap' }, c.sensitive ? '(sensitive)' : c.value === null ? h('span', { class: 'null' }, 'null') : c.value),
        h('td', null, h('span', { class: 'pill' }, c.source))
      )
    );
    filter.addEventListener('input', () => {
      const needle = filter.value.trim().toLowerCase();
      for (const r of rows) r.style.display = r.getAttribute('data-name').includes(needle) ? '' : 'none';
    });
    append(root, [
      h('section', { class: 'panel' }, h('h2', null, 'Configuration'), filter, table(['Name', 'Value', 'Source'], rows)),
      cfg.unused.length ? h('section', { class: 'panel' }, h('h2', null, 'Supplied but not used by weir'), h('p', { class: 'mono' }, cfg.unused.join(', '))) : null,
    ]);
    return root;
  }

  // ----------------------------------------------------------------- router

  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/';
    const [path, qs] = raw.split('?');
    const parts = path.split('/').filter(Boolean).map((p) => {
      try {
        return decodeURIComponent(p);
      } catch (_) {
        return p;
      }
    });
    return { parts, params: new URLSearchParams(qs || '') };
  }

  function pick(parts, params) {
    if (parts.length === 0 || (parts[0] === 'topics' && parts.length === 1)) return { nav: 'topics', poll: true, load: topicsView };
    if (parts[0] === 'topics') return { nav: 'topics', poll: true, load: () => topicView(parts[1]) };
    if (parts[0] === 'groups' && parts.length === 1) return { nav: 'groups', poll: true, load: groupsView };
    if (parts[0] === 'groups') return { nav: 'groups', poll: true, load: () => groupView(parts[1]) };
    if (parts[0] === 'transactions') return { nav: 'transactions', poll: true, load: transactionsView };
    if (parts[0] === 'records') return { nav: 'records', poll: false, load: () => recordsView(params) };
    if (parts[0] === 'broker') return { nav: 'broker', poll: false, load: brokerView };
    if (parts[0] === 'cluster') return { nav: 'cluster', poll: true, load: clusterView };
    return { nav: '', poll: false, load: async () => h('p', { class: 'error' }, 'No such page.') };
  }

  async function render(view, id, first) {
    try {
      const el = await view.load();
      if (id !== state.routeId) return;
      main.replaceChildren(el);
      main.setAttribute('data-view', view.nav);
      main.setAttribute('data-rendered', String(Number(main.getAttribute('data-rendered') || '0') + 1));
      setStatus(`updated ${clock(Date.now())}${view.poll ? ` · refreshing every ${POLL_MS / 1000} s` : ''}`, false);
    } catch (e) {
      if (id !== state.routeId) return;
      if (first) main.replaceChildren(errorPanel(e));
      setStatus(`refresh failed: ${e.message || e}`, true);
    }
  }

  function route() {
    state.routeId++;
    const id = state.routeId;
    if (state.timer) clearTimeout(state.timer);
    state.timer = null;
    const { parts, params } = parseHash();
    const view = pick(parts, params);
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('active', a.getAttribute('data-view') === view.nav);
    }
    main.removeAttribute('data-view');
    const loop = async (first) => {
      await render(view, id, first);
      if (view.poll && id === state.routeId) {
        state.timer = setTimeout(() => loop(false), POLL_MS);
      }
    };
    loop(true);
  }

  window.addEventListener('hashchange', route);
  route();
})();
