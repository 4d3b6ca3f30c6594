// Talking to the console: the token, JSON requests, and server-sent event streams read with
// fetch (so the token travels in a header, and reconnects resume with Last-Event-ID).
// Every API request carries the token in its Authorization header, and only there: never in
// a URL (logs, history), never in a cookie (cookies ignore ports: other local servers would
// get it). Without a valid token the console answers 401 and the page asks for it.

const TOKEN_KEY = 'podium.console.token';

/** Take `#token=...` from the address (then remove it from the address bar). */
export function adoptTokenFromHash() {
  const match = /(?:^#|&)token=([A-Za-z0-9_-]{16,200})/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(TOKEN_KEY, match[1]);
    history.replaceState(history.state, '', location.pathname + location.search);
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value.trim());
}

function headers(extra) {
  const out = Object.assign({}, extra);
  if (token()) out.Authorization = `Bearer ${token()}`;
  return out;
}

export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// A 401 answers the token a request carried: when the page has taken another token since
// (the person typed it meanwhile), that refusal is stale and must not ask for a token again.
async function parse(res, sent) {
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (!res.ok) {
    if (res.status === 401 && sent === token()) {
      setConn('locked');
      authListeners.forEach((fn) => fn());
    }
    throw new HttpError(res.status, (data && data.error) || `HTTP ${res.status}`);
  }
  return data;
}

export async function getJSON(path) {
  const sent = token();
  const res = await fetch(path, {headers: headers({Accept: 'application/json'}), cache: 'no-store'});
  return parse(res, sent);
}

export async function postJSON(path, body) {
  const sent = token();
  const res = await fetch(path, {
    method: 'POST', cache: 'no-store',
    headers: headers({'Content-Type': 'application/json', Accept: 'application/json'}),
    body: JSON.stringify(body || {}),
  });
  return parse(res, sent);
}

const authListeners = new Set();
export function onAuthNeeded(fn) {
  authListeners.add(fn);
}

// ------------------------------------------------------------------ connection state

const connListeners = new Set();
let connState = 'connecting';
export function onConnection(fn) {
  connListeners.add(fn);
  fn(connState);
}
// A page that reads once and holds no stream (an eval's report) says the console answered.
export function markReachable() {
  if (connState === 'connecting') setConn('connected');
}
function setConn(state) {
  if (state === connState) return;
  connState = state;
  connListeners.forEach((fn) => fn(state));
}

// ------------------------------------------------------------------ SSE over fetch

/**
 * Open a server-sent event stream; reconnects forever (backoff up to 5 s) and resumes after
 * the last event id it saw. handlers: {onMessage(type, data, id), onOpen(), lastId}.
 */
export function openStream(path, handlers) {
  let lastId = handlers.lastId ?? null;
  let stopped = false;
  let ctrl = null;
  let attempt = 0;

  const dispatch = (block) => {
    let type = 'message';
    let id = null;
    const data = [];
    for (const line of block.split('\n')) {
      if (!line || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') id = value;
    }
    if (id !== null) lastId = id;
    if (data.length) handlers.onMessage(type, data.join('\n'), id);
  };

  const run = async () => {
    while (!stopped) {
      ctrl = new AbortController();
      const extra = {Accept: 'text/event-stream'};
      if (lastId !== null) extra['Last-Event-ID'] = String(lastId);
      try {
        const sent = token();
        const res = await fetch(path, {headers: headers(extra), signal: ctrl.signal, cache: 'no-store'});
        if (res.status === 401 && sent !== token()) continue;  // a newer token: try it
        if (res.status === 401) {
          // No (valid) token: retrying cannot help. The page asks for the token and opens
          // its streams again once it has one.
          stopped = true;
          setConn('locked');
          authListeners.forEach((fn) => fn());
          return;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        attempt = 0;
        setConn('live');
        if (handlers.onOpen) handlers.onOpen();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = '';
        for (;;) {
          const {value, done} = await reader.read();
          if (done) break;
          buffer += value;
          let cut;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            dispatch(buffer.slice(0, cut));
            buffer = buffer.slice(cut + 2);
          }
        }
      } catch (err) {
        if (stopped) return;
      }
      if (stopped) return;
      attempt += 1;
      setConn(attempt > 2 ? 'offline' : 'reconnecting');
      await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 200 * 2 ** Math.min(attempt, 5))));
    }
  };
  run();
  return {
    close() {
      stopped = true;
      if (ctrl) ctrl.abort();
    },
  };
}
