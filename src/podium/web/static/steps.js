// A run's events folded into what the page shows (node states, taken routes, every execution
// of every step), and the step panel that shows one step's executions. Model and script text
// is always inserted as text; only gate prompts go through the allowlist of markdown.js.

import {h, fmtDuration, fmtTokens, fmtCost, pretty, fmtTime} from './dom.js';
import {renderHtml} from './markdown.js';

function newExec(step, iteration) {
  return {step, iteration, status: 'pending', exchanges: [], notes: [], scripts: [], members: [],
    streamKeys: [`${step}#${iteration}`]};
}

/** The names a for-each item's agent carries in its own events (prompts, answers, streamed
 * text): the item's step events carry its label `name[key]`, its agent's `name`, with the
 * item's iteration. The names before each `[` of a label ending in `]`, longest first
 * (events/model.py item_agent_names). */
export function itemAgentNames(step) {
  const names = [];
  if (!step.endsWith(']')) return names;
  let cut = step.lastIndexOf('[', step.length - 2);
  while (cut > 0) {
    names.push(step.slice(0, cut));
    cut = step.lastIndexOf('[', cut - 1);
  }
  return names;
}

/** Fold events[0..upto) into the state of the run at that point. */
export function fold(events, upto = events.length) {
  const s = {
    nodes: new Map(), edges: new Map(), execs: new Map(), byKey: new Map(),
    current: null, finished: null, startTs: null, ts: null, limits: [], warnings: [],
    openGate: null, tokens: 0, cost: 0, partial: false, failedStep: null,
  };
  const node = (name) => {
    let n = s.nodes.get(name);
    if (!n) s.nodes.set(name, (n = {count: 0, status: null}));
    return n;
  };
  const exec = (step, iteration) => {
    const key = `${step}#${iteration}`;
    let x = s.byKey.get(key);
    if (!x) {
      x = newExec(step, iteration);
      s.byKey.set(key, x);
      if (!s.execs.has(step)) s.execs.set(step, []);
      s.execs.get(step).push(x);
    }
    return x;
  };
  const latest = (step) => {
    const list = s.execs.get(step);
    return list && list.length ? list[list.length - 1] : exec(step, 1);
  };
  const lookup = (step, iteration) => (iteration ? exec(step, iteration) : latest(step));
  const end = Math.min(upto, events.length);
  for (let k = 0; k < end; k++) {
    const e = events[k];
    s.ts = e.ts;
    switch (e.type) {
      case 'run_started':
        if (s.startTs === null) s.startTs = e.ts;
        s.finished = null;
        break;
      case 'step_started': {
        const x = exec(e.step, e.iteration);
        Object.assign(x, {status: 'running', type: e.step_type, started: e.ts, group: e.group || null});
        if (e.group) {
          const g = latest(e.group);
          if (!g.members.includes(x)) g.members.push(x);
          for (const name of itemAgentNames(e.step)) {  // its agent's events find it
            const alias = `${name}#${e.iteration}`;
            if (!s.byKey.has(alias)) s.byKey.set(alias, x);
            if (!x.streamKeys.includes(alias)) x.streamKeys.push(alias);
          }
        } else {
          node(e.step).status = 'running';
          s.current = e.step;
        }
        break;
      }
      case 'step_finished': {
        const x = exec(e.step, e.iteration);
        Object.assign(x, {
          status: 'done', type: e.step_type, elapsed: e.elapsed, output: e.output, model: e.model,
          tokensIn: e.input_tokens, tokensOut: e.output_tokens, cost: e.cost_usd, priced: e.priced,
          finishedTs: e.ts,
        });
        if (!e.group) {
          const n = node(e.step);
          n.count = Math.max(n.count, e.iteration);
          n.status = 'done';
          s.tokens += (e.input_tokens || 0) + (e.output_tokens || 0);
          if (e.cost_usd === null || e.cost_usd === undefined) {
            if (e.input_tokens || e.output_tokens) s.partial = true;
          } else {
            s.cost += e.cost_usd;
          }
        }
        break;
      }
      case 'step_failed': {
        const x = exec(e.step, e.iteration);
        Object.assign(x, {status: 'failed', type: e.step_type, elapsed: e.elapsed, error: e.message,
          errorType: e.error_type, errorDetails: e.details || {}, finishedTs: e.ts,
          tokensIn: e.input_tokens, tokensOut: e.output_tokens, cost: e.cost_usd});
        s.failedStep = e.group || e.step;
        if (!e.group) {
          node(e.step).status = 'failed';
          node(e.step).count = Math.max(node(e.step).count, e.iteration);
        }
        break;
      }
      case 'prompt_rendered':
        // a validator's or a dialog's own call keeps the step's prompt on show (its answer is listed)
        if (e.call && e.call !== 'rerun' && e.call !== 'after_dialog') break;
        Object.assign(lookup(e.step, e.iteration), {prompt: e.prompt, system: e.system_prompt,
          provider: e.provider, model: e.model, effort: e.reasoning_effort, tools: e.tools});
        break;
      case 'model_exchange':
        lookup(e.step, e.iteration).exchanges.push({attempt: e.attempt, text: e.response_text,
          tokensIn: e.input_tokens, tokensOut: e.output_tokens, elapsed: e.elapsed, model: e.model,
          call: e.call});
        break;
      case 'parse_recovery':
        lookup(e.step, e.iteration).notes.push(
          `attempt ${e.attempt}/${e.max_attempts}: the answer did not parse (${e.reason}): ${e.error}`);
        break;
      case 'provider_retry':
        latest(e.step).notes.push(`provider retry ${e.attempt}/${e.max_attempts} in ${e.delay}s: ${e.error}`);
        break;
      case 'script_output':
        lookup(e.step, e.iteration).scripts.push(e);
        break;
      case 'gate_opened': {
        const x = e.kind === 'iteration_limit' ? null : lookup(e.step, e.iteration);
        const gate = {kind: e.kind, step: e.step, prompt: e.prompt, prompt_html: e.prompt_html,
          options: e.options, answer: null};
        if (x) x.gate = gate;
        s.openGate = gate;
        if (!x) s.limits.push(gate);
        break;
      }
      case 'gate_answered': {
        const gate = s.openGate && s.openGate.step === e.step ? s.openGate : null;
        if (gate) Object.assign(gate, {answer: e.selected, by: e.answered_by, extra: e.additional_input});
        s.openGate = null;
        break;
      }
      case 'route_taken': {
        const key = `${e.from_step}->${e.to_step}#${e.route_index}`;
        s.edges.set(key, (s.edges.get(key) || 0) + 1);
        const x = latest(e.from_step);
        x.route = {to: e.to_step, condition: e.condition, kind: e.kind, evaluated: e.evaluated};
        if (e.to_step === '$end') node('$end').status = 'done';
        break;
      }
      case 'limit_reached':
        s.limits.push({limit: e.limit, step: e.step, current: e.current, maximum: e.maximum,
          recent: e.recent_steps, loop: e.possible_loop});
        break;
      case 'warning':
        s.warnings.push(e.message);
        break;
      case 'run_finished':
        s.finished = e;
        s.current = e.status === 'waiting' ? e.step : null;
        if (e.terminal && e.terminal !== '$end') node(e.terminal).status = 'done';
        for (const n of s.nodes.values()) if (n.status === 'running' && e.status !== 'waiting') n.status = 'stopped';
        break;
      default:
        break;
    }
  }
  if (s.startTs !== null && s.current === null && !s.finished) s.current = null;
  return s;
}

// ------------------------------------------------------------------ the step panel

function section(title, ...body) {
  return h('section', {class: 'sec'}, h('h4', null, title), ...body);
}

function textBlock(text, cls = '') {
  return h('pre', {class: `text ${cls}`}, text === undefined || text === null ? '' : String(text));
}

function execSummary(x) {
  const bits = [];
  if (x.elapsed !== undefined) bits.push(fmtDuration(x.elapsed));
  const tokens = (x.tokensIn || 0) + (x.tokensOut || 0);
  if (tokens) bits.push(`${fmtTokens(x.tokensIn || 0)} in / ${fmtTokens(x.tokensOut || 0)} out`);
  if (x.cost !== undefined && x.cost !== null) bits.push(fmtCost(x.cost));
  else if (tokens && x.priced === false) bits.push('unpriced');
  if (x.model) bits.push(x.model);
  if (x.route) bits.push(`→ ${x.route.to}`);
  return bits.join(' · ');
}

const MARK = {done: '✓', failed: '✗', running: '●', pending: '○', stopped: '■'};

function execView(x, open, ctx) {
  const body = [];
  if (x.group) body.push(h('p', {class: 'muted'}, `member of ${x.group}`));
  if (x.error) {
    const more = x.errorDetails || {};
    const trace = more.traceback || more.stderr;  // a script's traceback is on its stderr
    body.push(section('Error', textBlock(`${x.errorType || 'error'}: ${x.error}`, 'err'),
      trace ? [h('h5', null, more.traceback ? 'Traceback' : 'stderr'), textBlock(trace, 'err traceback')] : null));
  }
  if (x.gate) body.push(section(x.gate.kind === 'iteration_limit' ? 'Iteration limit' : 'Gate', gateView(x.gate)));
  if (x.system) body.push(section('System prompt', textBlock(x.system)));
  if (x.prompt !== undefined) {
    const meta = [x.provider, x.model, x.effort && `effort ${x.effort}`, x.tools && x.tools.length && `tools: ${x.tools.join(', ')}`]
      .filter(Boolean).join(' · ');
    body.push(section('Prompt', meta ? h('p', {class: 'muted'}, meta) : null, textBlock(x.prompt, 'prompt')));
  }
  const streamed = x.status === 'running' && ctx.live
    ? x.streamKeys.map((k) => ctx.live[k]).find(Boolean) || null : null;
  if (streamed) body.push(liveView(streamed));
  x.exchanges.forEach((ex) => {
    const title = ex.call ? `Model answer (${ex.call}${ex.attempt > 1 ? `, attempt ${ex.attempt}` : ''})`
      : x.exchanges.length > 1 ? `Model answer (attempt ${ex.attempt})` : 'Model answer';
    const meta = `${fmtTokens(ex.tokensIn || 0)} in / ${fmtTokens(ex.tokensOut || 0)} out · ${fmtDuration(ex.elapsed)}`;
    body.push(section(title, h('p', {class: 'muted'}, meta), textBlock(ex.text, 'answer')));
  });
  if (x.notes.length) body.push(section('Notes', h('ul', null, x.notes.map((n) => h('li', null, n)))));
  x.scripts.forEach((sc) => {
    body.push(section('Script',
      h('p', {class: 'muted'}, `exit ${sc.exit_code} · ${fmtDuration(sc.elapsed)}`, sc.working_dir ? ` · in ${sc.working_dir}` : ''),
      textBlock(sc.argv.join(' '), 'argv'),
      h('h5', null, 'stdout', sc.stdout_truncated ? ' (truncated)' : ''), textBlock(sc.stdout, 'stdout'),
      sc.stderr ? [h('h5', null, 'stderr', sc.stderr_truncated ? ' (truncated)' : ''), textBlock(sc.stderr, 'stderr')] : null));
  });
  if (x.members.length) {
    const done = x.members.filter((m) => m.status === 'done').length;
    const cost = x.members.reduce((c, m) => c + (m.cost || 0), 0);
    body.push(section(`Members (${done}/${x.members.length} done · ${fmtCost(cost)})`, h('div', {class: 'members'},
      x.members.map((m) => h('details', {class: `exec st-${m.status}`},
        h('summary', null, h('span', {class: 'mark'}, MARK[m.status] || ''), ` ${m.step} `, h('span', {class: 'muted'}, execSummary(m))),
        execView(m, false, ctx))))));
  }
  if (x.output !== undefined && x.status === 'done') body.push(section('Output', textBlock(pretty(x.output), 'output')));
  if (x.route && x.route.condition) {
    const cond = x.route.condition.replace(/^\s*\{\{\s*|\s*\}\}\s*$/g, '');
    body.push(section('Route', h('p', null, 'took ', h('code', null, cond), ` → ${x.route.to}`)));
  }
  if (ctx.children) {
    const kids = ctx.children.filter((c) => c.parent_step === x.step && (!c.parent_iteration || c.parent_iteration === x.iteration));
    if (kids.length) {
      body.push(section('Sub-workflow runs', h('ul', null, kids.map((c) =>
        h('li', null, h('a', {href: `/runs/${c.id}`, 'data-link': ''}, c.slot || c.id), ` · ${c.workflow} · ${c.state}`)))));
    }
  }
  if (!body.length) {
    body.push(h('p', {class: 'muted'}, x.status === 'running' ? 'running…'
      : x.status === 'stopped' ? 'interrupted before it finished' : 'no details recorded'));
  }
  return h('div', {class: 'exec-body'}, body);
}

// What a running step's model has streamed so far (the store's live row): its reasoning
// dimmed, the tools it called, its text, and the context gauge. All of it inserted as text.
export function liveView(live) {
  const gauge = live.tokens_used
    ? `${live.estimated ? '≈ ' : ''}${fmtTokens(live.tokens_used)}${live.context_window ? ` of ${fmtTokens(live.context_window)}` : ''} tokens`
      + (live.context_window ? ` (${Math.round((100 * live.tokens_used) / live.context_window)}%)` : '')
    : null;
  const bar = live.tokens_used && live.context_window
    ? h('progress', {class: 'gauge-bar', max: live.context_window, value: Math.min(live.tokens_used, live.context_window)}) : null;
  return section('Streaming…',
    gauge ? h('p', {class: 'gauge live-gauge muted small'}, bar, gauge) : null,
    live.reasoning ? textBlock(live.reasoning, 'reasoning live-reasoning') : null,
    live.tools && live.tools.length ? h('p', {class: 'muted small live-tools'}, `tool calls: ${live.tools.join(', ')}`) : null,
    textBlock(live.text || '', 'answer live-text'));
}

export function gateView(gate) {
  return h('div', {class: 'gate-view'},
    renderHtml(gate.prompt_html),
    gate.options && gate.options.length
      ? h('p', {class: 'muted'}, 'options: ', gate.options.map((o) => o.value).join(', ')) : null,
    gate.answer !== null && gate.answer !== undefined
      ? h('p', null, 'answered ', h('strong', null, gate.answer), gate.by ? ` by ${gate.by}` : '',
        gate.extra && Object.keys(gate.extra).length ? [': ', h('span', {class: 'answer-text'}, Object.values(gate.extra).join(' / '))] : '')
      : h('p', {class: 'muted'}, 'not answered yet'));
}

// A terminate step's reason as the run rendered it; a template ({{ }}) never shows raw:
// before the step ran, the page says its reason comes then.
function terminalReason(detail, execs) {
  const ran = execs.filter((x) => x.output && typeof x.output === 'object' && x.output.reason !== undefined);
  if (ran.length) return h('p', {class: 'muted reason'}, `${detail.status}: ${ran[ran.length - 1].output.reason}`);
  if (!String(detail.reason).includes('{{')) return h('p', {class: 'muted reason'}, `${detail.status}: ${detail.reason}`);
  return h('p', {class: 'muted reason'}, `${detail.status}; its reason is written when the step runs`);
}

/** The panel for one step: what it is, then every execution, newest first. */
export function stepPanel(name, graphNode, state, ctx) {
  const kind = graphNode ? graphNode.kind : 'step';
  const execs = (state.execs.get(name) || []).filter((x) => !x.group);
  const n = state.nodes.get(name);
  const detail = (graphNode && graphNode.detail) || {};
  const facts = [];
  if (detail.description) facts.push(h('p', null, detail.description));
  if (detail.model) facts.push(h('p', {class: 'muted'}, `model ${detail.model}`));
  if (detail.command) facts.push(h('p', {class: 'muted mono'}, detail.command));
  if (detail.workflow) facts.push(h('p', {class: 'muted'}, `sub-workflow ${detail.workflow}`));
  if (detail.reason) facts.push(terminalReason(detail, execs));
  if (detail.source) facts.push(h('p', {class: 'muted'}, `for each ${detail.as} in ${detail.source}`));
  if (detail.members && kind === 'parallel') facts.push(h('p', {class: 'muted'}, `members: ${detail.members.map((m) => m.name).join(', ')}`));
  const list = execs.slice().reverse();
  return h('div', {class: 'panel-inner', dataset: {step: name}},
    h('header', {class: 'panel-head'},
      h('h3', null, name), h('span', {class: `kind k-${kind}`}, kind.replace('_', ' ')),
      n && n.count > 1 ? h('span', {class: 'badge'}, `×${n.count}`) : null),
    facts,
    list.length ? null : h('p', {class: 'muted'}, 'not run (yet) at this point of the run'),
    list.map((x, i) => h('details', {class: `exec st-${x.status}`, open: i === 0 ? true : null, dataset: {iteration: x.iteration}},
      h('summary', {title: x.started ? `started ${fmtTime(x.started)}` : null},
        h('span', {class: 'mark'}, MARK[x.status] || ''), ` #${x.iteration} `,
        h('span', {class: 'muted'}, execSummary(x))),
      execView(x, i === 0, ctx))));
}
