// The runs page: every run, newest first, live; runs waiting for a person on top.

import {h, append, clear, fmtAge, fmtDuration, fmtTokens, fmtCost, statePill} from './dom.js';
import {openStream, postJSON} from './net.js';

const FILTERS = [
  ['', 'All'], ['active', 'Active'], ['waiting', 'Waiting'], ['running', 'Running'],
  ['success', 'Succeeded'], ['failed', 'Failed'], ['interrupted', 'Interrupted'],
];

function elapsed(run, now) {
  const end = run.finished_at || (run.state === 'running' || run.state === 'waiting' ? now : run.updated_at);
  return Math.max(0, end - run.created_at);
}

export function runsPage(main, nav) {
  const params = new URLSearchParams(location.search);
  const filter = {
    status: params.get('status') || '', workflow: params.get('workflow') || '',
    q: params.get('q') || '', children: params.get('children') === '1', limit: 200,
  };
  const rows = new Map(); // id -> {run, tr}
  let order = [];
  let skew = 0;
  let counts = {};
  let needs = []; // the runs that need a person, from the store (not only those listed)
  let workflows = [];
  let stream = null;
  let searchTimer = null;
  let loaded = false; // no data yet: the page says it is loading, not that there are 0 runs

  const summary = h('p', {class: 'summary', id: 'runs-summary'}, 'Loading runs…');
  const loading = h('p', {class: 'loading muted', id: 'runs-loading', role: 'status'},
    h('span', {class: 'spinner', 'aria-hidden': 'true'}), 'Loading runs…');
  const attention = h('div', {class: 'attention', id: 'attention'});
  const chips = h('div', {class: 'chips', role: 'group', 'aria-label': 'Filter by status'});
  const workflowSelect = h('select', {id: 'filter-workflow', 'aria-label': 'Workflow'});
  const search = h('input', {type: 'search', id: 'filter-search', placeholder: 'Search id, workflow, step', value: filter.q, 'aria-label': 'Search'});
  const children = h('input', {type: 'checkbox', id: 'filter-children', checked: filter.children || null});
  const tbody = h('tbody');
  const empty = h('p', {class: 'empty muted', hidden: true}, 'No runs match. Start one with ', h('code', null, 'podium run FILE'), '.');
  const more = h('button', {type: 'button', class: 'ghost more', id: 'runs-more', hidden: true,
    onclick: () => { filter.limit += 200; connect(); }}, 'Show older runs');
  const table = h('table', {class: 'runs', id: 'runs-table'},
    h('thead', null, h('tr', null, ['State', 'Run', 'Step', 'Started', 'Duration', 'Tokens', 'Cost'].map((t) => h('th', null, t)))),
    tbody);

  clear(main).append(h('div', {class: 'page runs-page'},
    h('div', {class: 'page-head'}, h('h1', null, 'Runs'), summary),
    attention,
    h('div', {class: 'toolbar'}, chips, workflowSelect, search,
      h('label', {class: 'check'}, children, ' sub-workflow runs')),
    loading, table, empty, more));
  table.hidden = true;

  const now = () => Date.now() / 1000 + skew;

  function renderChips() {
    clear(chips);
    for (const [value, label] of FILTERS) {
      const n = {'': counts.total, active: counts.active, waiting: counts.waiting, running: counts.running,
        success: counts.success, failed: counts.failed_all, interrupted: counts.interrupted}[value] || 0;
      chips.append(h('button', {
        type: 'button', class: `chip${value === 'waiting' && n ? ' hot' : ''}`, 'aria-pressed': String(filter.status === value),
        dataset: {filter: value || 'all'},
        onclick: () => { filter.status = value; apply(); },
      }, label, h('span', {class: 'count'}, loaded ? String(n) : '…')));
    }
  }

  function renderWorkflows() {
    const current = filter.workflow;
    append(clear(workflowSelect), [h('option', {value: ''}, 'All workflows'),
      workflows.map((w) => h('option', {value: w, selected: w === current || null}, w))]);
  }

  function stepCell(run) {
    if (run.gate) {
      return h('span', {class: 'gate-note'}, '▲ ', run.gate.kind === 'iteration_limit' ? 'iteration limit at ' : 'gate ',
        h('strong', null, run.gate.step));
    }
    if (run.state === 'success' || run.state === 'failed') return h('span', {class: 'muted'}, run.terminal === '$end' ? 'end' : run.terminal || '');
    return run.current_step || '';
  }

  function rowFor(run) {
    const t = now();
    return h('tr', {class: `run-row st-${run.state}`, dataset: {run: run.id, state: run.state},
      onclick: (ev) => { if (!ev.target.closest('a')) nav(`/runs/${run.id}`); }},
    h('td', null, statePill(run.state)),
    h('td', null, h('a', {href: `/runs/${run.id}`, 'data-link': '', class: 'wf'}, run.workflow),
      h('div', {class: 'mono muted small'}, run.id, run.parent_run_id ? ' · sub-run' : '')),
    h('td', {class: 'step'}, stepCell(run)),
    h('td', {class: 'age', title: new Date(run.created_at * 1000).toLocaleString()}, fmtAge(t - run.created_at)),
    h('td', {class: 'dur'}, fmtDuration(elapsed(run, t))),
    h('td', {class: 'num'}, fmtTokens(run.input_tokens + run.output_tokens)),
    h('td', {class: 'num'}, fmtCost(run.cost_usd, run.cost_partial)));
  }

  function renderAttention() {
    const waiting = needs;
    clear(attention);
    attention.hidden = !waiting.length;
    if (!waiting.length) return;
    attention.append(h('h2', null, 'Needs attention'), h('ul', null, waiting.map((r) =>
      h('li', {class: `att st-${r.state}`},
        statePill(r.state), ' ',
        h('a', {href: `/runs/${r.id}`, 'data-link': ''}, r.workflow), ' ',
        h('span', {class: 'mono muted small'}, r.id), ' ',
        r.gate ? h('span', null, r.gate.kind === 'iteration_limit' ? 'asks for more iterations at ' : 'waits at gate ', h('strong', null, r.gate.step))
          : h('span', {class: 'muted'}, 'interrupted: no process advances it'),
        r.gate ? h('a', {class: 'button small', href: `/runs/${r.id}`, 'data-link': ''}, 'Answer')
          : h('button', {type: 'button', class: 'small resume', dataset: {resume: r.id}, onclick: (ev) => resume(ev.currentTarget, r.id)}, 'Resume')))));
  }

  async function resume(button, id) {
    button.disabled = true;
    try {
      const res = await postJSON(`/api/runs/${id}/resume`, {});
      button.textContent = 'Resuming…';
      button.title = res.message;
    } catch (err) {
      button.disabled = false;
      button.title = `Could not resume: ${err.message}`;
    }
  }

  function renderAll() {
    const fragment = document.createDocumentFragment();
    for (const id of order) {
      const entry = rows.get(id);
      entry.tr = rowFor(entry.run);
      fragment.append(entry.tr);
    }
    clear(tbody).append(fragment);
    empty.hidden = order.length > 0;
    more.hidden = order.length < filter.limit;
    table.hidden = order.length === 0;
    const waiting = counts.gates || 0;
    document.title = waiting ? `(${waiting}▲) podium console` : 'podium console';
    const bits = [`${counts.total || 0} runs`];
    if (counts.running) bits.push(`${counts.running} running`);
    if (waiting) bits.push(`${waiting} waiting for a person`);
    summary.textContent = bits.join(' · ');
    renderChips();
    renderAttention();
    performance.mark('runs-rendered');
    document.body.dataset.runsRendered = String(order.length);
  }

  function onRuns(data) {
    if (!loaded) {
      loaded = true;
      loading.remove();
    }
    skew = data.now - Date.now() / 1000;
    counts = data.counts;
    needs = data.attention || [];
    if (JSON.stringify(workflows) !== JSON.stringify(data.workflows)) {
      workflows = data.workflows;
      renderWorkflows();
    }
    if (data.full) rows.clear();
    for (const run of data.runs) {
      const entry = rows.get(run.id);
      if (entry && !data.full) {
        const tr = rowFor(run);
        if (entry.tr) entry.tr.replaceWith(tr);
        entry.run = run;
        entry.tr = tr;
      } else {
        rows.set(run.id, {run, tr: null});
      }
    }
    for (const id of data.removed || []) rows.delete(id);
    const before = order.join(',');
    order = data.order.filter((id) => rows.has(id));
    if (data.full || before !== order.join(',') || order.some((id) => !rows.get(id).tr)) renderAll();
    else {
      renderChips();
      renderAttention();
      const waiting = counts.gates || 0;
      document.title = waiting ? `(${waiting}▲) podium console` : 'podium console';
    }
  }

  function connect() {
    if (stream) stream.close();
    const q = new URLSearchParams();
    if (filter.status) q.set('status', filter.status);
    if (filter.workflow) q.set('workflow', filter.workflow);
    if (filter.q) q.set('q', filter.q);
    if (filter.children) q.set('children', '1');
    const shown = new URLSearchParams(q);
    if (filter.limit !== 200) q.set('limit', String(filter.limit));
    stream = openStream(`/api/stream?${q}`, {
      onMessage: (type, data) => { if (type === 'runs') onRuns(JSON.parse(data)); },
    });
    history.replaceState(history.state, '', `/${shown.toString() ? `?${shown}` : ''}`);
  }

  function apply() {
    renderChips();
    connect();
  }

  workflowSelect.addEventListener('change', () => { filter.workflow = workflowSelect.value; apply(); });
  children.addEventListener('change', () => { filter.children = children.checked; apply(); });
  search.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { filter.q = search.value.trim(); apply(); }, 250);
  });

  const ticker = setInterval(() => {
    const t = now();
    for (const id of order) {
      const {run, tr} = rows.get(id);
      if (!tr) continue;
      tr.querySelector('.age').textContent = fmtAge(t - run.created_at);
      if (run.state === 'running' || run.state === 'waiting') tr.querySelector('.dur').textContent = fmtDuration(elapsed(run, t));
    }
  }, 1000);

  renderChips();
  renderWorkflows();
  connect();
  return () => {
    clearInterval(ticker);
    clearTimeout(searchTimer);
    if (stream) stream.close();
  };
}


