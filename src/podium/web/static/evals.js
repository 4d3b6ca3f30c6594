// An eval's report (podium eval): the variants side by side, cost against pass rate, the
// outcome bars, the differences and the tests that judge them, and every run.

import {h, svg, clear} from './dom.js';
import {getJSON, markReachable} from './net.js';

const COLORS = ['#4f46e5', '#0891b2', '#ca8a04', '#dc2626', '#16a34a', '#9333ea', '#ea580c'];

const usd = (v) => (v === null || v === undefined ? '–' : `$${v.toFixed(v !== 0 && Math.abs(v) < 0.01 ? 5 : 4)}`);
const pct = (v) => (v === null || v === undefined ? '–' : `${Math.round(v * 100)}%`);
const num = (v) => (v === null || v === undefined ? '–' : (Math.round(v * 10) / 10).toString());

function variantsTable(report) {
  const rows = report.variants.map((v, i) => h('tr', {'data-variant': v.name},
    h('th', {scope: 'row'}, h('span', {class: 'swatch', style: `background:${COLORS[i % COLORS.length]}`}), v.name),
    h('td', {class: 'num'}, `${v.runs}/${v.planned}`),
    h('td', {class: 'num pass-rate'}, v.pass_rate === null ? '–' : `${pct(v.pass_rate)} of ${v.judged}`),
    h('td', {class: 'num cost'}, usd(v.cost_usd.mean)),
    h('td', {class: 'num'}, v.cost_usd.low === null ? '–' : `${usd(v.cost_usd.low)} – ${usd(v.cost_usd.high)}`),
    h('td', {class: 'num'}, `${num(v.steps.mean)} / ${num(v.steps.median)} / ${num(v.steps.p90)}`),
    h('td', {class: 'num'}, num(v.tokens.mean)),
    h('td', {class: 'num'}, v.latency_s.mean === null ? '–' : `${num(v.latency_s.mean)} s`)));
  return h('table', {class: 'runs', id: 'eval-variants'},
    h('thead', null, h('tr', null, ...['variant', 'runs', 'pass rate', 'cost (mean)', '95% interval',
      'steps (mean / median / p90)', 'tokens (mean)', 'latency'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', null, ...rows));
}

function agentsTable(report) {
  const agents = [...new Set(report.variants.flatMap((v) => Object.keys(v.cost_by_agent)))].sort();
  if (!agents.length) return null;
  return h('table', {class: 'runs', id: 'eval-agents'},
    h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'cost per run, by agent'),
      ...report.variants.map((v) => h('th', {scope: 'col'}, v.name)))),
    h('tbody', null, ...agents.map((a) => h('tr', null, h('th', {scope: 'row'}, a),
      ...report.variants.map((v) => h('td', {class: 'num'}, usd(v.cost_by_agent[a])))))));
}

// Cost (x) against pass rate (y), one dot per variant, its 95% cost interval as a whisker.
function scatter(report) {
  const W = 420, H = 260, L = 56, B = 36, T = 26, R = 48;
  const vs = report.variants.filter((v) => v.cost_usd.mean !== null);
  const highs = vs.map((v) => (v.cost_usd.high === null ? v.cost_usd.mean : v.cost_usd.high));
  const xmax = Math.max(0.0001, ...highs) * 1.1;
  const x = (c) => L + (Math.max(0, c) / xmax) * (W - L - R);
  const y = (p) => T + (1 - p) * (H - T - B);
  const plot = svg('svg', {class: 'chart', id: 'eval-scatter', viewBox: `0 0 ${W} ${H}`, role: 'img',
    'aria-label': 'cost per run against pass rate, per variant'});
  plot.append(svg('line', {x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis'}),
    svg('line', {x1: L, y1: T, x2: L, y2: H - B, class: 'axis'}),
    svg('text', {x: (L + W - R) / 2, y: H - 6, 'text-anchor': 'middle', class: 'axis-label'}, 'cost per run (USD)'),
    svg('text', {x: 12, y: (T + H - B) / 2, 'text-anchor': 'middle', class: 'axis-label',
      transform: `rotate(-90 12 ${(T + H - B) / 2})`}, 'pass rate'));
  for (const p of [0, 0.5, 1]) {
    plot.append(svg('text', {x: L - 6, y: y(p) + 4, 'text-anchor': 'end', class: 'tick'}, pct(p)));
  }
  plot.append(svg('text', {x: W - R, y: H - B + 14, 'text-anchor': 'end', class: 'tick'}, usd(xmax)));
  report.variants.forEach((v, i) => {
    if (v.cost_usd.mean === null) return;
    const py = y(v.pass_rate === null ? 0 : v.pass_rate);
    const color = COLORS[i % COLORS.length];
    const g = svg('g', {class: 'point', 'data-variant': v.name},
      svg('title', null, `${v.name}: ${usd(v.cost_usd.mean)} per run, pass ${pct(v.pass_rate)}`));
    if (v.cost_usd.low !== null) {
      g.append(svg('line', {x1: x(v.cost_usd.low), x2: x(v.cost_usd.high), y1: py, y2: py, stroke: color, class: 'whisker'}));
    }
    g.append(svg('circle', {cx: x(v.cost_usd.mean), cy: py, r: 6, fill: color}),
      svg('text', {x: x(v.cost_usd.mean) + 9, y: py - 8, class: 'point-label'}, v.name));
    plot.append(g);
  });
  return plot;
}

// One stacked bar per variant: how many runs ended at each outcome.
function outcomeBars(report) {
  const outcomes = [...new Set(report.variants.flatMap((v) => Object.keys(v.outcomes)))].sort();
  const W = 420, rowH = 26, L = 130, R = 12;
  const H = report.variants.length * rowH + 40;
  const most = Math.max(1, ...report.variants.map((v) => v.runs));
  const bars = svg('svg', {class: 'chart', id: 'eval-outcomes', viewBox: `0 0 ${W} ${H}`, role: 'img',
    'aria-label': 'outcomes per variant'});
  report.variants.forEach((v, i) => {
    const yy = 8 + i * rowH;
    bars.append(svg('text', {x: L - 8, y: yy + 15, 'text-anchor': 'end', class: 'tick'}, v.name));
    let at = L;
    for (const [k, o] of outcomes.entries()) {
      const n = v.outcomes[o] || 0;
      if (!n) continue;
      const w = (n / most) * (W - L - R);
      bars.append(svg('rect', {x: at, y: yy, width: w, height: rowH - 8, fill: COLORS[(k + 2) % COLORS.length],
        class: 'bar', 'data-outcome': o, 'data-variant': v.name},
        svg('title', null, `${v.name}: ${o} × ${n}`)));
      at += w;
    }
  });
  const legend = svg('g', {class: 'legend'});
  let lx = L;
  for (const [k, o] of outcomes.entries()) {
    legend.append(svg('rect', {x: lx, y: H - 20, width: 10, height: 10, fill: COLORS[(k + 2) % COLORS.length]}),
      svg('text', {x: lx + 14, y: H - 11, class: 'tick'}, o));
    lx += 24 + o.length * 7;
  }
  bars.append(legend);
  return bars;
}

function differences(report) {
  const d = report.differences;
  const tests = d.tests.flatMap((t) => ['pass_rate', 'cost_usd'].map((what) => {
    const x = t[what];
    const show = what === 'pass_rate' ? pct : usd;
    return h('tr', {class: x.significant ? 'significant' : ''},
      h('td', null, `${t.a} vs ${t.b}`), h('td', null, what === 'pass_rate' ? 'pass rate' : 'cost'),
      h('td', {class: 'num'}, `${show(x.a)} vs ${show(x.b)}`),
      h('td', null, x.significant ? 'larger than chance' : 'within chance'),
      h('td', null, `${x.test}, p = ${x.p_value.toPrecision(3)}`));
  }));
  const rows = d.rows.map((r) => h('li', null, `row ${r.row}: `,
    Object.entries(r.outcomes).map(([v, o]) => `${v} → ${o}`).join(', '),
    r.expect ? ` (expected ${r.expect})` : ''));
  return h('section', {class: 'panel', id: 'eval-differences'},
    h('h2', null, 'Differences'),
    rows.length ? h('ul', null, ...rows) : h('p', {class: 'muted'}, 'Every row reached the same outcome in every variant.'),
    tests.length ? h('table', {class: 'runs'},
      h('thead', null, h('tr', null, ...['variants', 'measure', 'values', 'verdict', 'test'].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', null, ...tests)) : null);
}

function runsList(report) {
  return h('table', {class: 'runs', id: 'eval-runs'},
    h('thead', null, h('tr', null, ...['run', 'variant', 'row', '#', 'outcome', 'pass', 'cost', 'steps'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', null, ...report.runs.map((r) => h('tr', null,
      h('td', null, h('a', {href: `/runs/${r.run_id}`, 'data-link': ''}, r.run_id)),
      h('td', null, r.variant), h('td', null, r.row), h('td', {class: 'num'}, r.repeat),
      h('td', null, r.outcome), h('td', null, r.passed === null ? '–' : (r.passed ? 'yes' : 'no')),
      h('td', {class: 'num'}, usd(r.cost_usd)), h('td', {class: 'num'}, r.steps)))));
}

export function evalPage(main, evalId) {
  let gone = false;
  clear(main).append(h('p', {class: 'muted pad', id: 'eval-loading', role: 'status'}, `Loading eval ${evalId}…`));
  getJSON(`/api/evals/${encodeURIComponent(evalId)}`).then((report) => {
    if (gone) return;
    markReachable();
    const summary = `${report.rows} rows × ${report.repeat} · ${report.variants.length} variants · spent ${usd(report.spent_usd)}`
      + (report.complete ? '' : ` · incomplete: podium eval --resume ${report.eval_id}`);
    clear(main).append(h('div', {class: 'pad eval-page', id: 'eval-page'},
      h('h1', null, `eval ${report.eval_id}`),
      h('p', {class: 'muted'}, report.workflow, ' · ', report.dataset),
      h('p', {id: 'eval-summary'}, summary),
      h('section', {class: 'panel'}, h('h2', null, 'Variants'), variantsTable(report), agentsTable(report)),
      h('section', {class: 'panel charts'},
        h('figure', null, scatter(report), h('figcaption', null, 'Cost per run against pass rate (whiskers: 95% interval of the cost)')),
        h('figure', null, outcomeBars(report), h('figcaption', null, 'Outcomes per variant'))),
      differences(report),
      h('section', {class: 'panel'}, h('h2', null, 'Runs'), runsList(report))));
  }).catch((err) => {
    if (gone) return;
    clear(main).append(h('p', {class: 'pad error', role: 'alert'}, String(err.message || err)));
  });
  return () => { gone = true; };
}
