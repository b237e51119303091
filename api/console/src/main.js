// The engineer's console of QUBIQ Edge (docs/console.md): login, the page
// list with the permission each needs, hash routing (#/scripts/pumps), the
// health pill. Every page is built from REST calls (api.js) only.
import { get, post, setCSRF, onEnded, ApiError } from './api.js';
import { h, clear, toast, refusal, describeNeed } from './ui.js';
import { overviewPage } from './pages/status.js';
import { devicesPage } from './pages/devices.js';
import { tagsPage } from './pages/tags.js';
import { alarmsPage } from './pages/alarms.js';
import { auditPage } from './pages/audit.js';
import { scriptsPage } from './pages/scripts.js';
import { sandboxPage } from './pages/sandbox.js';
import { usersPage } from './pages/users.js';

// PAGES: each page with the need of the route table it is built on (its
// main GET route's); a session without it sees the refusal page.
const PAGES = [
  { group: 'Status', path: '/status', title: 'Overview', need: 'tag:read', render: overviewPage },
  { group: 'Status', path: '/devices', title: 'Devices', need: 'tag:read', render: devicesPage },
  { group: 'Status', path: '/tags', title: 'Tags', need: 'tag:read', render: tagsPage },
  { group: 'Status', path: '/alarms', title: 'Alarms', need: 'alarm:read', render: alarmsPage },
  { group: 'Status', path: '/audit', title: 'Audit log', need: 'users_admin', render: auditPage },
  { group: 'Configure', path: '/scripts', title: 'Scripts', need: 'designer', render: scriptsPage },
  { group: 'Settings', path: '/settings/sandbox', title: 'Script Sandbox', need: 'sandbox_admin', render: sandboxPage },
  { group: 'Settings', path: '/settings/users', title: 'Users and API keys', need: 'users_admin', render: usersPage },
];

const $ = (id) => document.getElementById(id);
const state = { session: null, leave: [], guards: [], healthTimer: null, hash: '' };

// has reports whether the session holds need: a platform-realm session
// holds every scope (its grant is unrestricted); a permission must be the
// user's.
function has(session, need) {
  if (!need) return true;
  if (need.includes(':')) return session.realm === 'platform';
  return session.permissions.includes(need);
}

function leavePage() {
  state.guards = [];
  for (const fn of state.leave.splice(0)) {
    try { fn(); } catch { /* ignore */ }
  }
}

function showLogin(message) {
  leavePage();
  clearTimeout(state.healthTimer);
  state.session = null;
  setCSRF('');
  $('layout').hidden = true;
  $('who').hidden = true;
  $('health-pill').hidden = true;
  $('hatch').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('login-pass').value = '';
  $('login-user').focus();
}

function buildNav() {
  const nav = $('nav');
  const groups = {};
  for (const p of PAGES) (groups[p.group] ||= []).push(p);
  clear(nav, Object.entries(groups).map(([g, ps]) => h('div', { class: 'navgroup' },
    h('h3', {}, g),
    h('ul', {}, ps.map((p) => {
      const ok = has(state.session, p.need);
      return h('li', {}, h('a', { href: '#' + p.path, dataset: { path: p.path, need: p.need }, class: ok ? '' : 'locked',
        title: ok ? '' : 'needs ' + describeNeed(p.need) }, p.title, ok ? null : h('span', { class: 'lock' }, 'needs ' + p.need)));
    })))),
  h('p', { class: 'navfoot' }, h('a', { href: '/console/LICENSES.txt', target: '_blank', rel: 'noopener' }, 'Licences')));
}

async function showConsole(session) {
  state.session = session;
  setCSRF(session.csrf_token);
  $('login').hidden = true;
  if (session.realm !== 'platform') {
    $('layout').hidden = false;
    $('nav').replaceChildren();
    $('who').hidden = false;
    $('who-name').textContent = `${session.user} (${session.realm}${session.level ? ', ' + session.level : ''})`;
    clear($('main'), h('section', { class: 'refusal', role: 'alert' },
      h('h1', {}, 'The console is for platform-realm users'),
      h('p', { class: 'big' }, `“${session.user}” is an ${session.realm} user. Operators use the `, h('a', { href: '/liveview/' }, 'LiveView panels'), '.'),
      h('p', {}, 'The appliance refuses every console request of this session, whatever the browser sends.')));
    return;
  }
  $('who').hidden = false;
  $('who-name').textContent = `${session.user} · ${session.permissions.join(', ') || 'no permissions'}`;
  $('hatch').hidden = !session.escape_hatch;
  $('layout').hidden = false;
  buildNav();
  pollHealth();
  route();
}

async function pollHealth() {
  clearTimeout(state.healthTimer);
  if (!state.session) return;
  const pill = $('health-pill');
  try {
    const hl = await get('/health', { background: true });
    pill.hidden = false;
    pill.className = 'pill ' + (hl.status === 'ok' ? 'q-good' : hl.status === 'degraded' ? 'q-uncertain' : 'q-bad');
    pill.textContent = `Appliance ${hl.status}${hl.reasons.length ? ' · ' + hl.reasons.length + ' reason' + (hl.reasons.length > 1 ? 's' : '') : ''}`;
    pill.title = hl.reasons.join('\n');
  } catch (e) {
    if (e instanceof ApiError && e.status === 503 && e.problem.status) { /* failed: shown below */ }
    pill.hidden = false;
    pill.className = 'pill q-bad';
    pill.textContent = 'Appliance unreachable';
  }
  state.healthTimer = setTimeout(pollHealth, 5000);
}

function route() {
  if (!state.session || state.session.realm !== 'platform') return;
  // A page with unsaved work (the script editor) may keep the user on it.
  for (const g of state.guards) {
    const why = g();
    if (why && !window.confirm(why)) {
      history.replaceState(null, '', state.hash || '#/status');
      return;
    }
  }
  state.hash = location.hash;
  const hash = location.hash.replace(/^#/, '') || '/status';
  const page = PAGES.slice().sort((a, b) => b.path.length - a.path.length)
    .find((p) => hash === p.path || hash.startsWith(p.path + '/')) || PAGES[0];
  const rest = hash.slice(page.path.length).replace(/^\//, '');
  leavePage();
  for (const a of $('nav').querySelectorAll('a[data-path]')) {
    if (a.dataset.path === page.path) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  document.title = `${page.title} · QUBIQ Console`;
  const main = $('main');
  main.dataset.page = page.path;
  if (!has(state.session, page.need)) {
    clear(main, refusal(page.group === 'Settings' ? `Settings → ${page.title}` : page.title, page.need, state.session));
  } else {
    clear(main);
    const ctx = {
      main, session: state.session, params: rest ? rest.split('/').map(decodeURIComponent) : [],
      onLeave: (fn) => state.leave.push(fn),
      guard: (fn) => state.guards.push(fn),
      navigate: (p) => { location.hash = '#' + p; },
    };
    Promise.resolve(page.render(ctx)).catch((e) => {
      main.append(h('div', { class: 'problem', role: 'alert' }, 'This page failed: ' + (e.message || e)));
    });
  }
  const h1 = main.querySelector('h1');
  if (h1) { h1.tabIndex = -1; h1.focus({ preventScroll: true }); }
}

async function boot() {
  onEnded((detail) => showLogin(detail ? 'Signed out: ' + detail : 'Your session ended: sign in again.'));
  $('login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const btn = $('login-submit');
    btn.disabled = true;
    $('login-error').textContent = '';
    try {
      const s = await post('/auth/login', { user: $('login-user').value.trim(), password: $('login-pass').value });
      await showConsole(s);
    } catch (e) {
      $('login-error').textContent = e instanceof ApiError ? (e.problem.detail || e.message) : String(e.message || e);
    } finally {
      btn.disabled = false;
    }
  });
  $('logout').addEventListener('click', async () => {
    try { await post('/auth/logout'); } catch { /* ended anyway */ }
    showLogin('Signed out.');
  });
  window.addEventListener('hashchange', route);
  try {
    const s = await get('/auth/session');
    await showConsole(s);
  } catch (e) {
    // 401: no session yet; 403: an operator's session (the console is
    // for platform-realm users): say so.
    showLogin(e instanceof ApiError && e.status === 403 ? e.problem.detail : '');
  }
}

boot();
