// The console's entry point: the token, the router (/, /runs/ID and /evals/ID), the header.

import {h, clear, $} from './dom.js';
import {adoptTokenFromHash, onConnection, onAuthNeeded, setToken, token} from './net.js';
import {runsPage} from './runs.js';
import {runPage} from './run.js';
import {evalPage} from './evals.js';

adoptTokenFromHash();

const main = $('#main');
const crumbs = $('#crumbs');
const conn = $('#conn');
const banner = $('#banner');
const tokenButton = $('#token-button');
let dispose = null;
let lostAt = null;

function setCrumbs(items) {
  clear(crumbs);
  items.forEach(([label, href], i) => {
    if (i) crumbs.append(h('span', {class: 'sep'}, '/'));
    crumbs.append(href ? h('a', {href, 'data-link': ''}, label) : h('span', {class: 'here'}, label));
  });
}

function route() {
  if (dispose) dispose();
  dispose = null;
  const match = /^\/runs\/([A-Za-z0-9_-]+)\/?$/.exec(location.pathname);
  const evalMatch = /^\/evals\/([A-Za-z0-9_-]+)\/?$/.exec(location.pathname);
  if (evalMatch) {
    setCrumbs([['Runs', '/'], [`eval ${evalMatch[1]}`, null]]);
    document.title = `eval ${evalMatch[1]} · podium console`;
    dispose = evalPage(main, evalMatch[1]);
  } else if (match) {
    setCrumbs([['Runs', '/'], [match[1], null]]);
    dispose = runPage(main, match[1], navigate, setCrumbs);
  } else {
    setCrumbs([['Runs', null]]);
    document.title = 'podium console';
    dispose = runsPage(main, navigate);
  }
}

export function navigate(path) {
  if (path === location.pathname + location.search) return;
  history.pushState(null, '', path);
  window.scrollTo(0, 0);
  route();
}

document.addEventListener('click', (ev) => {
  const link = ev.target.closest('a[data-link]');
  if (!link || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.button !== 0) return;
  ev.preventDefault();
  navigate(link.getAttribute('href'));
});
window.addEventListener('popstate', route);

// `podium run --web`: the console lives as long as its run (the run page marks the body with
// data-console-of-run); once the run ended, a console that is gone stopped with it (not "offline")
function runEnded() {
  const st = document.body.dataset.runState;
  return document.body.dataset.consoleOfRun === '1' && /^\/runs\//.test(location.pathname)
    && !!st && !['running', 'waiting'].includes(st);
}

onConnection((state) => {
  if ((state === 'offline' || state === 'reconnecting') && runEnded()) {
    conn.dataset.state = 'ended';
    conn.textContent = 'run ended';
    clear(banner).append('The run ended, and the console of ', h('code', null, 'podium run --web'),
      ' stopped with it. The run stays in the run store: ', h('code', null, 'podium serve'), ' shows it.');
    banner.className = 'banner ended';
    banner.hidden = false;
    return;
  }
  banner.className = 'banner';
  conn.dataset.state = state;
  conn.textContent = {live: 'live', connected: 'connected', connecting: 'connecting', reconnecting: 'reconnecting…', offline: 'offline', locked: 'token needed'}[state] || state;
  if (state === 'live' || state === 'connected') {
    lostAt = null;
    banner.hidden = true;
    clear(banner);
  } else if (state === 'offline' || state === 'reconnecting') {
    lostAt = lostAt || Date.now();
    if (state === 'offline') {
      clear(banner).append('The console is not reachable; retrying every few seconds. ',
        'If it was stopped, start it again with ', h('code', null, 'podium serve'), ' (same port): this page reconnects by itself.');
      banner.hidden = false;
    }
  }
});

function tokenForm(why) {
  const form = h('form', {class: 'token-form', id: 'token-form'},
    h('label', {for: 'token-input'}, why ? `${why} ` : '',
      'Console token (printed by podium serve in the address after #token=; kept in $PODIUM_HOME/console.token): '),
    h('input', {id: 'token-input', type: 'password', autocomplete: 'off', size: 48}),
    h('button', {type: 'submit', class: 'primary small'}, 'Use'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    setToken(form.querySelector('input').value);
    banner.hidden = true;
    clear(banner);
    tokenButton.hidden = !!token();
    route();
  });
  clear(banner).append(form);
  banner.hidden = false;
  form.querySelector('input').focus();
}

if (!token()) tokenButton.hidden = false;
// A request refused for want of the token: ask for it (once, however many requests failed).
onAuthNeeded(() => {
  tokenButton.hidden = false;
  if (!banner.querySelector('#token-form')) tokenForm('This console shows runs only with its token.');
});
tokenButton.addEventListener('click', () => tokenForm(''));

route();
