// The run page: the graph with the path taken, live; the open gates; the step panel; a
// timeline to scrub through the run.

import {h, append, clear, fmtDuration, fmtTokens, fmtCost, fmtTime, statePill, pretty, short} from './dom.js';
import {getJSON, postJSON, openStream, HttpError} from './net.js';
import {GraphView} from './graph.js';
import {fold, stepPanel} from './steps.js';
import {renderHtml} from './markdown.js';

export function runPage(main, runId, nav, setCrumbs) {
  const events = [];
  let detail = null;
  let graph = null;
  let graphData = null;
  let selected = new URLSearchParams(location.search).get('step');
  let chosenByUser = !!selected;
  let upto = null; // null: follow the live end
  let stream = null;
  let frame = 0;
  let panelSig = '';
  let live = {};  // what the running steps streamed so far: `step#iteration` -> live row
  let liveSig = '{}';
  let gatesSig = '';
  let outcomeSig = '';
  let skew = 0;
  let disposed = false;

  const title = h('h1', {class: 'run-title'}, 'Loading run…');
  // until the run's first data arrives (its facts, its graph): a loading state, not blanks
  const loading = h('p', {class: 'loading muted', id: 'run-loading', role: 'status'},
    h('span', {class: 'spinner', 'aria-hidden': 'true'}), `Loading run ${runId}…`);
  const pill = h('span', {id: 'run-state'});
  const facts = h('div', {class: 'facts', id: 'run-facts'});
  const stopButton = h('button', {type: 'button', class: 'danger', id: 'stop-run', hidden: true});
  const resumeButton = h('button', {type: 'button', class: 'primary', id: 'resume-run', hidden: true}, 'Resume');
  const actionMsg = h('span', {class: 'muted small', role: 'status'});
  const notices = h('div', {class: 'notices'});
  const gatesBox = h('div', {class: 'gates', id: 'gates'});
  // the last answer's confirmation: a resumed run can consume its gate (and so remove the
  // card) before the answer's reply arrives, so the message lives outside the cards
  const gateNews = h('p', {class: 'gate-news small', id: 'gate-news', role: 'status'});
  const outcome = h('div', {class: 'outcome', id: 'outcome', hidden: true});
  const terminalNote = h('p', {class: 'notice', hidden: true},
    'This run asks at the terminal where it was started: answer it there. (Runs started with ',
    h('code', null, 'podium run --web'), ', and parked runs, are answered here.)');
  const graphPane = h('div', {class: 'graph-pane', id: 'graph'});
  const panel = h('aside', {class: 'panel', id: 'panel', 'aria-live': 'polite'}, h('p', {class: 'muted'}, 'Select a step.'));
  const slider = h('input', {type: 'range', min: 0, max: 0, value: 0, id: 'timeline', 'aria-label': 'Timeline'});
  const sliderLabel = h('span', {class: 'tl-label mono small', id: 'timeline-label'});
  const liveButton = h('button', {type: 'button', class: 'ghost small', id: 'timeline-live', hidden: true}, 'Back to live');
  const children = h('div', {class: 'children small'});

  clear(main).append(h('div', {class: 'page run-page'},
    h('div', {class: 'run-head'},
      h('div', {class: 'run-head-main'}, h('div', {class: 'title-row'}, title, pill), facts, children),
      h('div', {class: 'run-actions'}, actionMsg, resumeButton, stopButton)),
    loading, notices, terminalNote, gateNews, gatesBox, outcome,
    h('div', {class: 'timeline'}, h('span', {class: 'small muted'}, 'Timeline'), slider, sliderLabel, liveButton),
    h('div', {class: 'split'},
      h('div', {class: 'graph-wrap'},
        h('div', {class: 'graph-tools'},
          h('button', {type: 'button', class: 'ghost small', title: 'Zoom out', onclick: () => graph && graph.setZoom(graph.zoom / 1.2)}, '−'),
          h('button', {type: 'button', class: 'ghost small', title: 'Fit', onclick: () => graph && graph.fit()}, 'fit'),
          h('button', {type: 'button', class: 'ghost small', title: 'Zoom in', onclick: () => graph && graph.setZoom(graph.zoom * 1.2)}, '+'),
          h('span', {class: 'legend small muted'},
            h('i', {class: 'lg visited'}), 'ran ', h('i', {class: 'lg current'}), 'now ', h('i', {class: 'lg taken'}), 'route taken')),
        graphPane),
      panel)));

  // ---------------------------------------------------------------- rendering

  const schedule = () => {
    if (!frame && !disposed) frame = requestAnimationFrame(render);
  };

  function select(id) {
    selected = id;
    chosenByUser = true;
    const q = new URLSearchParams(location.search);
    q.set('step', id);
    history.replaceState(history.state, '', `${location.pathname}?${q}`);
    panelSig = '';
    schedule();
  }

  function render() {
    frame = 0;
    const end = upto === null ? events.length : upto;
    const st = fold(events, end);
    const run = detail && detail.run;
    const finished = st.finished && st.finished.status !== 'waiting' ? st.finished : null;
    const waitingAt = detail && detail.gates.length && upto === null ? detail.gates[detail.gates.length - 1].step
      : (st.openGate ? st.openGate.step : null);
    if (run && run.state === 'interrupted' && upto === null) stopped(st);
    if (!chosenByUser) {
      const pick = waitingAt || st.current || failingStep(st, finished) || (finished && finished.terminal) || null;
      if (pick && graphData && graphData.graph.nodes.some((n) => n.id === pick)) selected = pick;
    }
    if (graph) {
      graph.update(st, {selected, waitingAt, finished});
      if (!chosenByUser && selected) graph.reveal(selected);
    }
    terminalNote.hidden = !(upto === null && st.openGate && run && run.live && !detail.gates.length);
    renderPanel(st, end);
    renderTimeline(end);
    if (run) renderHead(run, st);
  }

  // the step a failed, errored or limit-exhausted run stopped at: its page opens on it
  function failingStep(st, finished) {
    const status = finished ? finished.status : detail && detail.run.status;
    if (!['failed', 'error', 'limit'].includes(status)) return null;
    if (finished && finished.step && finished.status !== 'failed') return finished.step;
    return st.failedStep || (st.limits.length && st.limits[st.limits.length - 1].step) || null;
  }

  // an interrupted run (stopped, killed, crashed) advances no step: none stays 'running'
  function stopped(st) {
    for (const n of st.nodes.values()) if (n.status === 'running') n.status = 'stopped';
    for (const list of st.execs.values()) for (const x of list) if (x.status === 'running') x.status = 'stopped';
    st.current = null;
  }

  function renderPanel(st, end) {
    if (!selected) return;
    const execs = st.execs.get(selected) || [];
    const members = execs.reduce((n, x) => n + x.members.length, 0);
    const following = upto === null ? liveSig : '';  // the live text shows only at the live end
    const sig = `${selected}|${end}|${execs.length}|${execs.map((x) => x.status + x.exchanges.length + x.scripts.length).join(',')}|${members}|${detail ? detail.children.length : 0}|${following}`;
    if (sig === panelSig) return;
    panelSig = sig;
    const node = graphData ? graphData.graph.nodes.find((n) => n.id === selected) : null;
    const open = new Set([...panel.querySelectorAll('details[open]')].map((d) => d.dataset.iteration));
    const fresh = stepPanel(selected, node, st, {children: detail ? detail.children : [], live: upto === null ? live : null});
    if (open.size) {
      for (const d of fresh.querySelectorAll('details[data-iteration]')) {
        if (open.has(d.dataset.iteration)) d.open = true;
      }
    }
    clear(panel).append(fresh);
    // a streaming step's text grows at its end: keep its newest words in view
    for (const pre of panel.querySelectorAll('pre.live-text')) pre.scrollTop = pre.scrollHeight;
  }

  function renderTimeline(end) {
    slider.max = String(events.length);
    slider.value = String(end);
    liveButton.hidden = upto === null;
    const e = events[end - 1];
    if (!e) {
      sliderLabel.textContent = 'no events yet';
      return;
    }
    const start = events[0].ts;
    const what = e.step || e.from_step || '';
    sliderLabel.textContent = `${end}/${events.length} · +${fmtDuration(e.ts - start)} · ${e.type.replace('_', ' ')}${what ? ` ${what}` : ''}${e.iteration ? ` #${e.iteration}` : ''}`;
  }

  function renderHead(run, st) {
    const now = Date.now() / 1000 + skew;
    title.textContent = run.workflow;
    clear(pill).append(statePill(run.state));
    const end = run.finished_at || (run.state === 'running' || run.state === 'waiting' ? now : run.updated_at);
    clear(facts).append(
      h('span', {class: 'mono'}, run.id),
      h('span', null, 'step ', h('strong', null, run.current_step || '–')),
      h('span', {title: fmtTime(run.created_at)}, 'started ', fmtTime(run.created_at)),
      h('span', null, 'elapsed ', fmtDuration(Math.max(0, end - run.created_at))),
      h('span', null, `${run.iterations} step${run.iterations === 1 ? '' : 's'}`),
      h('span', null, `${fmtTokens(run.input_tokens + run.output_tokens)} tokens`),
      h('span', {title: run.cost_partial ? 'some models are unpriced' : ''}, fmtCost(run.cost_usd, run.cost_partial)));
    if (run.trace_id) {  // OpenTelemetry: linked when PODIUM_TRACE_URL is set
      facts.append(h('span', {class: 'mono', title: 'OpenTelemetry trace id'}, 'trace ',
        run.trace_url ? h('a', {href: run.trace_url, target: '_blank', rel: 'noopener'}, run.trace_id) : run.trace_id));
    }
    for (const g of runningGroups(st)) {
      facts.append(h('span', {class: 'group-progress', dataset: {group: g.step}}, 'group ', h('strong', null, g.step), ' ',
        `${g.done}/${g.total} done${g.failed ? `, ${g.failed} failed` : ''} · ${fmtCost(g.cost, g.partial)}`));
    }
    resumeButton.hidden = run.state !== 'interrupted';
    const canStop = run.status === 'running' && run.live;
    stopButton.hidden = !canStop;
    if (!stopButton.dataset.armed) stopButton.textContent = 'Stop run';
  }

  // the groups (parallel, for each) running now: their members done of those known, and cost
  function runningGroups(st) {
    const out = [];
    for (const [step, list] of st.execs) {
      const x = list[list.length - 1];
      if (!x || x.status !== 'running' || !x.members.length) continue;
      const node = graphData ? graphData.graph.nodes.find((n) => n.id === step) : null;
      const declared = node && node.kind === 'parallel' && node.detail && node.detail.members ? node.detail.members.length : 0;
      const done = x.members.filter((m) => m.status === 'done').length;
      const failed = x.members.filter((m) => m.status === 'failed').length;
      const cost = x.members.reduce((c, m) => c + (m.cost || 0), 0);
      const partial = x.members.some((m) => m.status === 'done' && (m.cost === null || m.cost === undefined) && (m.tokensIn || m.tokensOut));
      out.push({step, done, failed, total: Math.max(declared, x.members.length), cost, partial});
    }
    return out;
  }

  function renderNotices() {
    clear(notices);
    if (graphData && graphData.warning) notices.append(h('p', {class: 'notice'}, graphData.warning));
    if (detail && detail.run.state === 'interrupted') {
      notices.append(h('p', {class: 'notice interrupted', id: 'interrupted-note'},
        detail.run.status === 'running' ? 'Interrupted: this run was marked running but no process advances it any more (stopped, killed or crashed). '
          : 'Interrupted: this run was stopped. ',
        'It keeps its checkpoint: Resume continues it from there (or ', h('code', null, `podium resume ${detail.run.id}`), ').'));
    }
  }

  function renderChildren() {
    clear(children);
    if (!detail || !detail.children.length) return;
    append(children, ['sub-workflow runs: ', detail.children.map((c, i) => [i ? ', ' : '',
      h('a', {href: `/runs/${c.id}`, 'data-link': ''}, c.slot || c.parent_step || c.id), ` (${c.state})`])]);
  }

  function renderOutcome() {
    const run = detail.run;
    const sig = JSON.stringify([run.status, run.terminal, run.reason, run.error, run.output, run.state]);
    if (sig === outcomeSig) return;
    outcomeSig = sig;
    clear(outcome);
    const done = !['running', 'waiting'].includes(run.status);
    outcome.hidden = !done;
    if (!done) return;
    outcome.className = `outcome st-${run.state}`;
    append(outcome, [
      h('div', {class: 'outcome-head'}, statePill(run.state), ' ',
        run.terminal ? h('span', null, 'ended at ', h('strong', null, run.terminal === '$end' ? 'end' : run.terminal)) : null,
        run.exit_code !== null && run.exit_code !== undefined ? h('span', {class: 'muted'}, ` · exit ${run.exit_code}`) : null),
      run.reason ? h('p', {class: 'reason'}, run.reason) : null,
      run.error ? h('pre', {class: 'text err'}, run.error) : null,
      run.output !== null && run.output !== undefined ? h('details', {class: 'output'}, h('summary', null, 'Output'), h('pre', {class: 'text'}, pretty(run.output))) : null]);
  }

  function renderGates() {
    const gates = detail ? detail.gates : [];
    const sig = JSON.stringify(gates.map((g) => g.id));
    if (sig === gatesSig) return;
    gatesSig = sig;
    clear(gatesBox);
    for (const gate of gates) gatesBox.append(gateCard(gate));
  }

  function gateCard(gate) {
    const status = h('p', {class: 'gate-status small', role: 'status'});
    const buttons = [];
    const send = async (value, text) => {
      buttons.forEach((b) => { b.disabled = true; });
      status.className = 'gate-status small';
      status.textContent = 'Sending…';
      try {
        const res = await postJSON(`/api/runs/${runId}/gates/${gate.id}/answer`, {value: String(value), text: text ?? null});
        const news = res.resumed === 'live' ? `Answered ${res.answered}; the run continues.`
          : `Answered ${res.answered}; resuming the run (log: ${res.log}).`;
        status.textContent = news;
        gateNews.textContent = `Gate '${gate.step}': ${news}`;
      } catch (err) {
        buttons.forEach((b) => { b.disabled = false; });
        status.className = 'gate-status small err';
        status.textContent = err instanceof HttpError && err.status === 401
          ? 'The console token is needed to answer: use the address printed by podium serve, or Enter token above.'
          : `Could not answer: ${err.message}`;
      }
    };
    const body = [];
    if (gate.kind === 'iteration_limit') {
      const input = h('input', {type: 'number', min: 1, max: 100000, value: 5, id: `grant-${gate.id}`, class: 'grant'});
      const grant = h('button', {type: 'button', class: 'primary', onclick: () => send(String(Math.max(1, parseInt(input.value, 10) || 1)))}, 'Grant and continue');
      const stop = h('button', {type: 'button', class: 'danger', onclick: () => send('0')}, 'Stop the run');
      buttons.push(grant, stop);
      body.push(h('div', {class: 'gate-options'}, h('label', null, 'Grant ', input, ' more iterations '), grant, stop));
    } else {
      const extra = h('div', {class: 'gate-extra', hidden: true});
      for (const option of gate.options) {
        const label = option.label && option.label !== option.value ? `${option.label}` : String(option.value);
        const button = h('button', {type: 'button', class: 'option', dataset: {value: option.value}, title: `value: ${option.value}${option.route ? ` → ${option.route}` : ''}`,
          onclick: () => {
            if (!option.prompt_for) {
              send(option.value);
              return;
            }
            const area = h(option.multiline ? 'textarea' : 'input', {id: `gate-text-${gate.id}`, class: 'gate-text', 'aria-label': option.prompt_for, rows: option.multiline ? 4 : null});
            const go = h('button', {type: 'button', class: 'primary', onclick: () => send(option.value, area.value)}, `Send “${label}”`);
            buttons.push(go);
            clear(extra).append(h('label', {for: `gate-text-${gate.id}`}, option.prompt_for), area, go);
            extra.hidden = false;
            area.focus();
          }}, label);
        buttons.push(button);
      }
      body.push(h('div', {class: 'gate-options'}, buttons), extra);
    }
    const where = gate.run_id !== runId ? h('span', {class: 'small muted'}, ' in sub-run ', h('a', {href: `/runs/${gate.run_id}`, 'data-link': ''}, gate.run_id)) : null;
    return h('section', {class: 'gate-card', dataset: {gate: gate.id}},
      h('h2', null, '▲ ', gate.kind === 'iteration_limit' ? 'More iterations?' : 'Decision needed', ' at ', h('code', null, gate.step), where,
        h('span', {class: 'small muted'}, ` · waiting since ${fmtTime(gate.created_at)}`)),
      h('div', {class: 'gate-prompt'}, renderHtml(gate.prompt_html)),
      body, status);
  }

  // ---------------------------------------------------------------- actions

  stopButton.addEventListener('click', async () => {
    if (!stopButton.dataset.armed) {
      stopButton.dataset.armed = '1';
      stopButton.textContent = 'Click again to stop';
      setTimeout(() => { delete stopButton.dataset.armed; schedule(); }, 4000);
      return;
    }
    delete stopButton.dataset.armed;
    stopButton.disabled = true;
    try {
      const res = await postJSON(`/api/runs/${runId}/stop`, {});
      actionMsg.textContent = res.message;
    } catch (err) {
      actionMsg.textContent = `Could not stop: ${err.message}`;
    } finally {
      stopButton.disabled = false;
    }
  });

  resumeButton.addEventListener('click', async () => {
    resumeButton.disabled = true;
    try {
      const res = await postJSON(`/api/runs/${runId}/resume`, {});
      actionMsg.textContent = res.message;
    } catch (err) {
      actionMsg.textContent = `Could not resume: ${err.message}`;
    } finally {
      resumeButton.disabled = false;
    }
  });

  slider.addEventListener('input', () => {
    const v = parseInt(slider.value, 10);
    upto = v >= events.length ? null : v;
    schedule();
  });
  liveButton.addEventListener('click', () => { upto = null; schedule(); });

  const ticker = setInterval(() => { if (detail && ['running', 'waiting'].includes(detail.run.state)) schedule(); }, 1000);

  // ---------------------------------------------------------------- data

  function onDetail(data) {
    loading.remove();
    detail = data;
    skew = 0;
    const crumbs = [['Runs', '/']];
    for (const p of data.parents) crumbs.push([`${p.workflow} ${short(p.id, 8)}`, `/runs/${p.id}`]);
    crumbs.push([`${data.run.workflow} ${short(data.run.id, 8)}`, null]);
    setCrumbs(crumbs);
    document.title = `${data.run.state === 'waiting' ? '▲ ' : ''}${data.run.workflow} · podium console`;
    document.body.dataset.runState = data.run.state;
    renderGates();
    renderOutcome();
    renderNotices();
    renderChildren();
    schedule();
  }

  async function start() {
    try {
      const [d, g] = await Promise.all([getJSON(`/api/runs/${runId}`), getJSON(`/api/runs/${runId}/graph`)]);
      if (disposed) return;
      graphData = g;
      document.body.dataset.consoleOfRun = d.console_of_run ? '1' : '0';
      graph = new GraphView(graphPane, g, select);
      requestAnimationFrame(() => graph && graph.fit());
      onDetail(d);
    } catch (err) {
      const locked = err instanceof HttpError && err.status === 401;
      clear(main).append(h('div', {class: 'page'}, h('h1', null, locked ? 'Token needed' : 'Run not found'),
        h('p', null, locked ? 'This console shows runs only with its token: open the address podium serve printed, or enter the token above.' : err.message),
        h('p', null, h('a', {href: '/', 'data-link': ''}, 'All runs'))));
      return;
    }
    stream = openStream(`/api/runs/${runId}/stream`, {
      onMessage: (type, data) => {
        if (type === 'ev') {
          const e = JSON.parse(data);
          if (!events.length || e.seq > events[events.length - 1].seq) events.push(e);
          schedule();
        } else if (type === 'run') {
          onDetail(JSON.parse(data));
        } else if (type === 'live') {
          liveSig = data;
          live = JSON.parse(data);
          schedule();
        }
      },
    });
  }

  start();
  return () => {
    disposed = true;
    delete document.body.dataset.consoleOfRun;
    clearInterval(ticker);
    if (frame) cancelAnimationFrame(frame);
    if (stream) stream.close();
  };
}
