// DOM helpers and formatting. Text is always inserted as text nodes: nothing here parses HTML.

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (key === 'text') {
      el.textContent = String(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** h('div', {class: 'x', onclick: fn}, 'text', child) */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function $(sel, root = document) {
  return root.querySelector(sel);
}

// ------------------------------------------------------------------ formatting

export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return '–';
  const s = Math.max(0, seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs}h ${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(hrs / 24)}d ${hrs % 24}h`;
}

export function fmtAge(seconds) {
  if (!isFinite(seconds)) return '–';
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function fmtTokens(n) {
  if (!n) return '0';
  if (n < 1000) return String(n);
  if (n < 1e6) return `${(n / 1000).toFixed(n < 1e4 ? 1 : 0)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

export function fmtCost(usd, partial) {
  if (usd === null || usd === undefined) return partial ? 'unpriced' : '–';
  const text = usd === 0 ? '$0' : usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
  return partial ? `~${text}` : text;
}

export function fmtTime(ts) {
  if (!ts) return '–';
  return new Date(ts * 1000).toLocaleString();
}

export function pretty(value) {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

export function short(text, n) {
  const s = String(text ?? '');
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

export const STATE_LABELS = {
  running: 'running', waiting: 'waiting', success: 'succeeded', failed: 'failed',
  error: 'error', limit: 'limit', interrupted: 'interrupted',
};

export function statePill(state) {
  return h('span', {class: `pill s-${state}`, title: stateHelp(state)},
    state === 'waiting' ? '▲ ' : '', STATE_LABELS[state] || state);
}

function stateHelp(state) {
  return {
    waiting: 'waiting for a person: a gate or an iteration limit',
    interrupted: 'stopped or crashed before its end: resume it with podium resume',
    limit: 'a limit ran out (iterations, time or budget)',
    error: 'a step failed or no route matched',
    failed: 'ended in a failed terminate step',
  }[state] || '';
}
