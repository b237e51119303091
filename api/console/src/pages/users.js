// Settings → Users and API keys (permission users_admin): the users of
// sessions (GET/POST /users, POST /users/{name}/disable, PUT
// /users/{name}/password) and the API keys (GET/POST /apikeys, DELETE
// /apikeys/{id}); a new key's token is shown once. The appliance refuses a
// user or key wider than the administrator's own grant, naming what.
import { get, post, put, del, enc } from '../api.js';
import { h, clear, section, table, busy, confirm, dialog, problem, toast, timeCell } from '../ui.js';

const SCOPES = ['tag:read', 'tag:write', 'alarm:read', 'alarm:ack', 'db:read', 'db:write', 'hist:read', 'hist:write',
  'vars:read', 'vars:write', 'file:read', 'file:write', 'script:execute'];
const PERMS = ['designer', 'sandbox_admin', 'users_admin', 'firmware'];
const LEVELS = ['view', 'operate', 'supervise', 'design'];

function checks(name, values, checked = []) {
  return h('div', { class: 'checks', role: 'group', 'aria-label': name }, values.map((v) =>
    h('label', {}, h('input', { type: 'checkbox', name, value: v, checked: checked.includes(v) }), ' ', v)));
}
const picked = (box) => [...box.querySelectorAll('input:checked')].map((i) => i.value);

// doneToast tells what a disable or revoke did: done (204), or the
// server's detail when it had been done before and nothing changed (200
// {"already": true, "detail": ...}: another administrator was first, or the
// page was stale).
function doneToast(answer, done) {
  if (answer && answer.already) toast(answer.detail || 'Nothing changed: it was done before.', 'notice');
  else toast(done);
}

export function usersPage(ctx) {
  const usersBox = h('div', { id: 'users' });
  const keysBox = h('div', { id: 'apikeys' });
  ctx.main.append(h('header', { class: 'pagehead' }, h('h1', {}, 'Users and API keys')),
    section('Users', usersBox, userForm(() => loadUsers())),
    section('API keys', keysBox, keyForm(() => loadKeys())));

  async function loadUsers() {
    let us;
    try { us = await get('/users'); } catch (e) { clear(usersBox, problem(e, 'Users')); return; }
    clear(usersBox, table([
      { label: 'User', cell: (u) => h('strong', {}, u.name) },
      { label: 'Realm', key: 'realm' },
      { label: 'Level', cell: (u) => u.level || '' },
      { label: 'Permissions', cell: (u) => u.permissions.join(', ') },
      { label: 'State', cell: (u) => h('span', { class: 'q ' + (u.disabled ? 'q-bad' : 'q-good') }, u.disabled ? 'disabled' : 'active') },
      { label: 'Created', cell: (u) => timeCell(u.created) },
      { label: 'Password changed', cell: (u) => timeCell(u.password_changed) },
      { label: '', cell: (u) => [
        h('button', { type: 'button', class: 'small', onclick: () => setPassword(u.name) }, 'Set password…'),
        u.disabled ? null : h('button', { type: 'button', class: 'small danger', dataset: { disable: u.name }, onclick: async (ev) => {
          if (!await confirm('Disable a user', `Disable ${u.name}? Their sessions end at once and they can no longer sign in.`, 'Disable', true)) return;
          await busy(ev.target, async () => {
            try { doneToast(await post(`/users/${enc(u.name)}/disable`), `${u.name} is disabled.`); loadUsers(); } catch (e) { usersBox.prepend(problem(e, 'Not disabled')); }
          });
        } }, 'Disable')] },
    ], us, { empty: 'No user yet.', rowAttrs: (u) => ({ dataset: { user: u.name } }) }));
  }

  async function setPassword(name) {
    const pw = h('input', { type: 'password', id: 'pw-new', autocomplete: 'new-password', 'aria-label': 'New password' });
    const v = await dialog(`New password for ${name}`, h('label', {}, 'Password ', pw), [
      { label: 'Cancel', value: false, class: 'ghost' }, { label: 'Set password', value: true, class: 'primary' }]);
    if (!v) return;
    try { await put(`/users/${enc(name)}/password`, { password: pw.value }); toast(`Password of ${name} set; their sessions ended.`); loadUsers(); } catch (e) { usersBox.prepend(problem(e, 'Password not set')); }
  }

  async function loadKeys() {
    let ks;
    try { ks = await get('/apikeys'); } catch (e) { clear(keysBox, problem(e, 'API keys')); return; }
    clear(keysBox, table([
      { label: 'Name', cell: (k) => h('strong', {}, k.name) },
      { label: 'Id', cell: (k) => h('code', {}, k.id) },
      { label: 'Scopes', class: 'wrap', cell: (k) => k.scopes.join(', ') },
      { label: 'Write level', key: 'write_level' },
      { label: 'Permissions', cell: (k) => (k.permissions || []).join(', ') },
      { label: 'Prefixes', cell: (k) => (k.prefixes || []).join(', ') || 'every path' },
      { label: 'Expires', cell: (k) => (k.expires ? timeCell(k.expires) : 'never') },
      { label: 'Created', cell: (k) => timeCell(k.created) },
      { label: '', cell: (k) => h('button', { type: 'button', class: 'small danger', dataset: { revoke: k.id }, onclick: async (ev) => {
        if (!await confirm('Revoke an API key', `Revoke “${k.name}” (${k.id})? Clients and scripts using it are refused from their next call.`, 'Revoke', true)) return;
        await busy(ev.target, async () => {
          try { doneToast(await del('/apikeys/' + enc(k.id)), `Key ${k.name} revoked.`); loadKeys(); } catch (e) { keysBox.prepend(problem(e, 'Not revoked')); }
        });
      } }, 'Revoke') },
    ], ks, { empty: 'No API key.', rowAttrs: (k) => ({ dataset: { key: k.id } }) }));
  }

  loadUsers();
  loadKeys();
}

function userForm(done) {
  const name = h('input', { id: 'user-name', autocomplete: 'off', required: true });
  const realm = h('select', { id: 'user-realm' }, h('option', { value: 'platform' }, 'platform (console, REST, scripts)'), h('option', { value: 'operator' }, 'operator (LiveView panels)'));
  const level = h('select', { id: 'user-level' }, ['view', 'operate', 'supervise'].map((l) => h('option', { value: l }, l)));
  const perms = checks('user-permissions', PERMS);
  const pw = h('input', { id: 'user-password', type: 'password', autocomplete: 'new-password', required: true });
  const btn = h('button', { type: 'submit', class: 'primary', id: 'user-create' }, 'Create user');
  const out = h('div', { 'aria-live': 'polite' });
  const levelRow = h('label', { hidden: true }, 'Level ', level);
  const permRow = h('div', {}, h('span', {}, 'Permissions'), perms);
  realm.addEventListener('change', () => { levelRow.hidden = realm.value !== 'operator'; permRow.hidden = realm.value === 'operator'; });
  const form = h('form', { class: 'form', id: 'user-form', onsubmit: (ev) => {
    ev.preventDefault();
    busy(btn, async () => {
      clear(out);
      const body = { name: name.value.trim(), realm: realm.value, password: pw.value };
      if (realm.value === 'operator') body.level = level.value; else body.permissions = picked(perms);
      try {
        await post('/users', body);
        toast(`User ${body.name} created.`);
        form.reset();
        levelRow.hidden = true; permRow.hidden = false;
        done();
      } catch (e) { clear(out, problem(e, 'User not created')); }
    });
  } }, h('h3', {}, 'New user'), h('label', {}, 'Name ', name), h('label', {}, 'Realm ', realm), levelRow, permRow,
  h('label', {}, 'Password ', pw), btn, out);
  return form;
}

function keyForm(done) {
  const name = h('input', { id: 'key-name', autocomplete: 'off', required: true, placeholder: 'scada-line1' });
  const scopes = checks('key-scopes', SCOPES, ['tag:read']);
  const level = h('select', { id: 'key-level' }, LEVELS.map((l) => h('option', { value: l, selected: l === 'view' }, l)));
  const perms = checks('key-permissions', PERMS);
  const prefixes = h('input', { id: 'key-prefixes', placeholder: 'Line1, Line2/Pump (empty: every path)' });
  const expires = h('input', { id: 'key-expires', type: 'datetime-local' });
  const btn = h('button', { type: 'submit', class: 'primary', id: 'key-create' }, 'Create key');
  const out = h('div', { 'aria-live': 'polite' });
  const form = h('form', { class: 'form', id: 'key-form', onsubmit: (ev) => {
    ev.preventDefault();
    busy(btn, async () => {
      clear(out);
      const body = { name: name.value.trim(), scopes: picked(scopes), write_level: level.value, permissions: picked(perms) };
      const px = prefixes.value.split(',').map((s) => s.trim()).filter(Boolean);
      if (px.length) body.prefixes = px;
      if (expires.value) body.expires = new Date(expires.value).toISOString();
      let created;
      try { created = await post('/apikeys', body); } catch (e) { clear(out, problem(e, 'Key not created')); return; }
      form.reset();
      done();
      const tok = h('input', { id: 'key-token', readonly: true, value: created.token, 'aria-label': 'Token', class: 'token' });
      const copy = h('button', { type: 'button', onclick: async () => {
        tok.select();
        try { await navigator.clipboard.writeText(created.token); copy.textContent = 'Copied'; } catch { copy.textContent = 'Select and copy it (Ctrl+C)'; }
      } }, 'Copy');
      await dialog(`API key “${body.name}” created`, [
        h('p', { class: 'warnbox' }, 'This is the only time the token is shown: the appliance keeps only its hash. Copy it now into the client that uses it.'),
        h('div', { class: 'tokenrow' }, tok, copy),
        h('p', { class: 'dim' }, `Id ${created.id}. Use it as Authorization: Bearer <token>, or qubiqctl --api-key.`)],
      [{ label: 'I have copied it', value: true, class: 'primary' }]);
    });
  } }, h('h3', {}, 'New API key'), h('label', {}, 'Name ', name), h('div', {}, h('span', {}, 'Scopes'), scopes),
  h('label', {}, 'Write level ', level), h('div', {}, h('span', {}, 'Permissions'), perms), h('label', {}, 'Tag prefixes ', prefixes),
  h('label', {}, 'Expires ', expires), btn, out);
  return form;
}
