// Gate prompts arrive as HTML rendered on the server by markdown-it-py (web/markdown.py: raw
// HTML escaped, links only http(s) and mailto). The page still does not trust it: the HTML is
// parsed into an inert document (nothing in it runs or loads) and rebuilt from an allowlist of
// tags, with every piece of text a text node and no attribute but a checked link's href.

import {h} from './dom.js';

const SAFE_URL = /^(https?:\/\/|mailto:)/i;
const TAGS = new Set(['p', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'ul', 'ol', 'li', 'blockquote',
  'pre', 'code', 'strong', 'em', 'a', 'hr', 'br']);

export function renderHtml(html) {
  const doc = new DOMParser().parseFromString(String(html ?? ''), 'text/html');
  return h('div', {class: 'md'}, ...rebuild(doc.body));
}

function rebuild(node) {
  const out = [];
  for (const child of node.childNodes) {
    if (child.nodeType === Node.TEXT_NODE) {
      out.push(child.data);
      continue;
    }
    if (child.nodeType !== Node.ELEMENT_NODE) continue;
    const tag = child.localName;
    const inner = rebuild(child);
    if (!TAGS.has(tag)) {
      out.push(...inner);  // an unknown element keeps its text, never its markup
      continue;
    }
    // Headings sit below the card's own title: shift them two levels, as before.
    const shifted = /^h[1-6]$/.test(tag) ? `h${Math.min(6, Number(tag[1]) + 2)}` : tag;
    if (tag === 'a') {
      const href = child.getAttribute('href') || '';
      out.push(SAFE_URL.test(href)
        ? h('a', {href, target: '_blank', rel: 'noopener noreferrer'}, ...inner) : inner);
    } else if (tag === 'ol' && child.getAttribute('start')) {
      out.push(h('ol', {start: String(parseInt(child.getAttribute('start'), 10) || 1)}, ...inner));
    } else {
      out.push(h(shifted, null, ...inner));
    }
  }
  return out;
}
