// Drawing the laid-out workflow graph (positions come from the server) as SVG, and marking on
// it what the run did: visited and running steps, taken routes, loop counts, the current step.

import {svg, short} from './dom.js';

const ICONS = {
  agent: '✦', script: '›_', set: '=', wait: '◷', human_gate: '?', questions: '?',
  terminate: '■', workflow: '↳', mcp: '⚙', parallel: '⇉', for_each: '∀',
};

function octagon(x, y, w, h) {
  const c = Math.min(14, h / 3);
  return [[x + c, y], [x + w - c, y], [x + w, y + c], [x + w, y + h - c], [x + w - c, y + h],
    [x + c, y + h], [x, y + h - c], [x, y + c]].map((p) => p.join(',')).join(' ');
}

function hexagon(x, y, w, h) {
  const c = Math.min(18, h / 2);
  return [[x + c, y], [x + w - c, y], [x + w, y + h / 2], [x + w - c, y + h], [x + c, y + h],
    [x, y + h / 2]].map((p) => p.join(',')).join(' ');
}

function shape(n) {
  const {x, y, w, h, kind} = n;
  if (kind === 'terminate') return svg('polygon', {class: 'shape', points: octagon(x, y, w, h)});
  if (kind === 'human_gate' || kind === 'questions') return svg('polygon', {class: 'shape', points: hexagon(x, y, w, h)});
  const rx = kind === 'start' || kind === 'end' ? h / 2 : kind === 'script' || kind === 'set' ? 4 : 10;
  return svg('rect', {class: 'shape', x, y, width: w, height: h, rx});
}

function subtitle(n) {
  const d = n.detail || {};
  if (n.kind === 'terminate') return `${d.status || 'terminate'}${d.steps ? ` · ${d.steps}` : ''}`;
  if (n.kind === 'agent' && d.model) return `agent · ${d.model}`;
  if (n.kind === 'workflow' && d.workflow) return `sub-workflow · ${d.workflow}`;
  if (n.kind === 'for_each') return `for each ${d.as || ''}`;
  return n.kind.replace('_', ' ');
}

export class GraphView {
  constructor(container, data, onSelect) {
    this.container = container;
    this.data = data;
    this.onSelect = onSelect;
    this.zoom = 1;
    this.nodes = new Map();
    this.edges = new Map();
    this.build();
  }

  build() {
    const {graph} = this.data;
    const defs = svg('defs', null,
      svg('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'},
        svg('path', {d: 'M0,0 L10,5 L0,10 z', class: 'arrow'})),
      svg('marker', {id: 'arrow-taken', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'},
        svg('path', {d: 'M0,0 L10,5 L0,10 z', class: 'arrow-taken'})));
    const edgeLayer = svg('g', {class: 'edges'});
    const labelLayer = svg('g', {class: 'labels'});
    const nodeLayer = svg('g', {class: 'nodes'});
    for (const e of graph.edges) {
      const never = e.unreachable ? ' unreachable' : '';
      const path = svg('path', {class: `edge${e.back ? ' back' : ''}${never}`, d: e.path, 'marker-end': 'url(#arrow)'},
        svg('title', null, (e.title || `${e.src} → ${e.dst}`) + (never ? ' (no value the steps can produce takes this route: podium explore)' : '')));
      edgeLayer.append(path);
      let label = null;
      if (e.label) {
        const width = e.label_w;
        const [lx, ly] = e.label_at;
        label = svg('g', {class: `elabel${never}`},
          svg('rect', {x: lx - width / 2, y: ly - 9, width, height: 18, rx: 4}),
          svg('text', {x: lx, y: ly + 4, 'text-anchor': 'middle'}, e.label),
          svg('title', null, e.title || e.label));
        labelLayer.append(label);
      }
      this.edges.set(e.id, {data: e, path, label});
    }
    for (const n of graph.nodes) {
      const g = svg('g', {class: `node k-${n.kind}${n.detail && n.detail.status ? ` t-${n.detail.status}` : ''}`,
        tabindex: 0, role: 'button', 'data-node': n.id, 'aria-label': `${n.label} (${n.kind})`});
      g.append(shape(n));
      if (n.kind === 'workflow') g.append(svg('rect', {class: 'inner', x: n.x + 4, y: n.y + 4, width: n.w - 8, height: n.h - 8, rx: 7}));
      if (n.kind === 'start' || n.kind === 'end') {
        g.append(svg('text', {class: 'label', x: n.x + n.w / 2, y: n.y + n.h / 2 + 4, 'text-anchor': 'middle'}, n.label));
      } else {
        g.append(svg('text', {class: 'icon', x: n.x + 12, y: n.y + 22}, ICONS[n.kind] || '•'));
        g.append(svg('text', {class: 'label', x: n.x + 30, y: n.y + 22}, short(n.label, 22)));
        g.append(svg('text', {class: 'sub', x: n.x + 30, y: n.y + 40}, short(subtitle(n), 26)));
        const members = (n.detail && n.detail.members) || [];
        members.forEach((m, i) => {
          const my = n.y + 50 + i * 20;
          g.append(svg('rect', {class: 'member', x: n.x + 10, y: my, width: n.w - 20, height: 16, rx: 4, 'data-member': m.name}));
          g.append(svg('text', {class: 'member-label', x: n.x + 18, y: my + 12}, short(`${ICONS[m.kind] || '•'} ${m.name}`, 28)));
        });
      }
      const badge = svg('g', {class: 'badge', visibility: 'hidden'},
        svg('rect', {x: n.x + n.w - 22, y: n.y - 9, width: 30, height: 18, rx: 9}),
        svg('text', {x: n.x + n.w - 7, y: n.y + 4, 'text-anchor': 'middle'}, ''));
      g.append(badge);
      const tip = [n.label, subtitle(n), n.detail && n.detail.description].filter(Boolean).join('\n');
      g.append(svg('title', null, tip));
      g.addEventListener('click', () => this.onSelect(n.id));
      g.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          this.onSelect(n.id);
        }
      });
      nodeLayer.append(g);
      this.nodes.set(n.id, {data: n, g, badge});
    }
    this.svg = svg('svg', {class: 'graph', viewBox: `0 0 ${graph.width} ${graph.height}`, role: 'group',
      'aria-label': 'workflow graph'}, defs, edgeLayer, labelLayer, nodeLayer);
    this.container.append(this.svg);
    this.untangle();
    this.setZoom(1);
  }

  /** Route labels never overlap one another or a step: each label is as wide as its text, and
   * one that collides moves along its edge's side (down, up, then sideways) to a free place. */
  untangle() {
    const boxes = [...this.nodes.values()].map(({data: n}) => ({x: n.x, y: n.y, w: n.w, h: n.h}));
    const hit = (a) => boxes.some((b) => a.x < b.x + b.w + 2 && b.x < a.x + a.w + 2 && a.y < b.y + b.h + 2 && b.y < a.y + a.h + 2);
    const labels = [...this.edges.values()].filter((e) => e.label)
      .sort((a, b) => a.data.label_at[1] - b.data.label_at[1] || a.data.label_at[0] - b.data.label_at[0]);
    let right = this.data.graph.width;
    let bottom = this.data.graph.height;
    for (const {label, data} of labels) {
      const rect = label.querySelector('rect');
      const text = label.querySelector('text');
      let len = 0;
      try { len = text.getComputedTextLength(); } catch { len = 0; }
      const w = Math.max(data.label_w, len + 12);
      const [lx, ly] = data.label_at;
      const tries = [[0, 0]];
      for (let k = 1; k <= 12; k++) tries.push([0, 20 * k], [0, -20 * k], [w / 2 + 10 * k, 0], [-(w / 2 + 10 * k), 0]);
      let spot = tries[0];
      for (const [dx, dy] of tries) {
        const box = {x: lx + dx - w / 2, y: ly + dy - 9, w, h: 18};
        if (box.x >= 0 && box.y >= 0 && !hit(box)) { spot = [dx, dy]; break; }
      }
      const x = lx + spot[0];
      const y = ly + spot[1];
      rect.setAttribute('x', String(x - w / 2));
      rect.setAttribute('y', String(y - 9));
      rect.setAttribute('width', String(w));
      text.setAttribute('x', String(x));
      text.setAttribute('y', String(y + 4));
      boxes.push({x: x - w / 2, y: y - 9, w, h: 18});
      right = Math.max(right, x + w / 2 + 4);
      bottom = Math.max(bottom, y + 13);
    }
    if (right > this.data.graph.width || bottom > this.data.graph.height) {
      this.data.graph.width = Math.ceil(right);
      this.data.graph.height = Math.ceil(bottom);
      this.svg.setAttribute('viewBox', `0 0 ${this.data.graph.width} ${this.data.graph.height}`);
    }
  }

  setZoom(z) {
    const {graph} = this.data;
    this.zoom = Math.max(0.2, Math.min(3, z));
    this.svg.setAttribute('width', String(Math.round(graph.width * this.zoom)));
    this.svg.setAttribute('height', String(Math.round(graph.height * this.zoom)));
  }

  fit() {
    const {graph} = this.data;
    const box = this.container.getBoundingClientRect();
    if (!box.width || !graph.width) return;
    // As wide as the pane (no sideways scrolling); a tall graph keeps a readable size and
    // scrolls down (the current step is scrolled into view).
    const wide = (box.width - 16) / graph.width;
    const tall = (box.height - 16) / graph.height;
    this.setZoom(Math.max(0.25, Math.min(1.1, wide, Math.max(tall, 0.85))));
  }

  /** Mark the run's progress: state is the folded events (steps.js fold). */
  update(state, {selected, waitingAt, finished}) {
    for (const [id, {data, g, badge}] of this.nodes) {
      const n = state.nodes.get(id);
      let visited = !!(n && (n.count > 0 || n.status));
      if (id === '__start__') visited = state.startTs !== null;
      const cls = g.classList;
      cls.toggle('visited', visited);
      cls.toggle('running', !!(n && n.status === 'running'));
      cls.toggle('failed', !!(n && n.status === 'failed'));
      cls.toggle('current', id === state.current && !finished);
      cls.toggle('waiting', id === waitingAt);
      cls.toggle('selected', id === selected);
      cls.toggle('ended', !!(finished && finished.terminal === id));
      const count = n ? n.count : 0;
      badge.setAttribute('visibility', count > 1 ? 'visible' : 'hidden');
      if (count > 1) badge.querySelector('text').textContent = `×${count}`;
      if (data.detail && data.detail.members) {
        for (const rect of g.querySelectorAll('rect.member')) {
          const name = rect.getAttribute('data-member');
          const runs = [...state.execs.keys()].filter((k) => k === name || k.startsWith(`${name}[`))
            .flatMap((k) => state.execs.get(k)).filter((x) => x.group === id);
          const last = runs[runs.length - 1];
          rect.setAttribute('class', `member${last ? ` m-${last.status}` : ''}`);
        }
      }
    }
    const started = state.startTs !== null;
    for (const [id, {data, path, label}] of this.edges) {
      const taken = data.kind === 'start' ? started : (state.edges.get(id) || 0);
      path.classList.toggle('taken', !!taken);
      path.setAttribute('marker-end', taken ? 'url(#arrow-taken)' : 'url(#arrow)');
      if (label) label.classList.toggle('taken', !!taken);
      if (label && data.kind !== 'start') {
        const text = label.querySelector('text');
        const want = taken > 1 ? `${data.label} ×${taken}` : data.label;
        if (text.textContent !== want) text.textContent = want;
      }
    }
  }

  reveal(id) {
    const node = this.nodes.get(id);
    if (!node) return;
    const {x, y, w, h} = node.data;
    const box = this.container;
    const cx = (x + w / 2) * this.zoom;
    const cy = (y + h / 2) * this.zoom;
    if (cx < box.scrollLeft || cx > box.scrollLeft + box.clientWidth || cy < box.scrollTop || cy > box.scrollTop + box.clientHeight) {
      box.scrollTo({left: cx - box.clientWidth / 2, top: cy - box.clientHeight / 2, behavior: 'smooth'});
    }
  }
}
