// A tiny, safe Markdown renderer for gate prompts. It builds DOM nodes directly: every piece
// of text becomes a text node, raw HTML in the source stays visible text, and only http(s) and
// mailto links become links. Supported: headings, paragraphs, lists, block quotes, fenced and
// inline code, bold, italics, links, horizontal rules.

import {h, append} from './dom.js';

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

export function renderMarkdown(source) {
  const root = h('div', {class: 'md'});
  const lines = String(source ?? '').replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) root.append(h('p', null, inline(para.join(' '))));
    para = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)/.exec(line);
    if (fence) {
      flush();
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1;
      root.append(h('pre', null, h('code', null, body.join('\n'))));
      continue;
    }
    const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      flush();
      const level = Math.min(6, heading[1].length + 2);
      root.append(h(`h${level}`, null, inline(heading[2])));
      i += 1;
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      root.append(h('hr'));
      i += 1;
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && /^\s{0,3}>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s{0,3}>\s?/, ''));
      const inner = renderMarkdown(quoted.join('\n'));
      root.append(h('blockquote', null, ...inner.childNodes));
      continue;
    }
    const item = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const list = h(ordered ? 'ol' : 'ul');
      while (i < lines.length) {
        const m = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(lines[i]);
        if (m && /\d/.test(m[1]) === ordered) {
          list.append(h('li', null, inline(m[2])));
          i += 1;
        } else if (lines[i].trim() && /^\s{2,}/.test(lines[i]) && list.lastChild) {
          append(list.lastChild, [' ', inline(lines[i].trim())]);
          i += 1;
        } else {
          break;
        }
      }
      root.append(list);
      continue;
    }
    if (!line.trim()) {
      flush();
      i += 1;
      continue;
    }
    para.push(line.trim());
    i += 1;
  }
  flush();
  return root;
}

// Inline spans: `code`, **bold**, *em* / _em_, [text](url). Everything else is text.
const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([^*]+?)(?<=\S)\*\*|(?<!\w)__(?=\S)([^_]+?)(?<=\S)__(?!\w)|\*(?=[^*\s])([^*]+?)(?<=\S)\*|(?<!\w)_(?=[^_\s])([^_]+?)(?<=\S)_(?!\w)|\[([^\]]+)\]\(([^)\s]+)\)/g;

export function inline(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1]) out.push(h('code', null, m[2]));
    else if (m[3] !== undefined) out.push(h('strong', null, inline(m[3])));
    else if (m[4] !== undefined) out.push(h('strong', null, inline(m[4])));
    else if (m[5] !== undefined) out.push(h('em', null, inline(m[5])));
    else if (m[6] !== undefined) out.push(h('em', null, inline(m[6])));
    else if (m[7] !== undefined) {
      const url = m[8];
      out.push(SAFE_URL.test(url)
        ? h('a', {href: url, target: '_blank', rel: 'noopener noreferrer'}, inline(m[7]))
        : `[${m[7]}](${url})`);
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
