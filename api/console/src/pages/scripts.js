// Configure → Scripts (permission designer): the modules with their
// versions (GET /scripts), the editor with in-editor lint (POST
// /scripts/lint as you type), save as a new version (PUT
// /scripts/{module}), diff against an earlier version (GET
// /scripts/{module}/versions/{v}) and restore it, roll back (POST
// /scripts/{module}/rollback), and run an entry with JSON args (POST
// /scripts/{module}/{entry}/run) showing its result, logs and duration or
// the problem's kind.
import { get, put, post, enc, ApiError } from '../api.js';
import { h, clear, busy, toast, confirm, problem, timeCell, fmtTime, errText } from '../ui.js';
import { createEditor, createDiff } from '../editor.js';

const NAME_RE = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

const TEMPLATE = `@gateway(timeout_ms=2000)
def main(args):
    qv = system.tag.read(["Line1/Pump/Speed"])[0]
    return {"speed": qv.value, "quality": qv.quality, "args": args}
`;

export async function scriptsPage(ctx) {
  const list = h('ul', { class: 'modlist', id: 'modules', 'aria-label': 'Modules' });
  const newBtn = h('button', { type: 'button', id: 'new-module' }, 'New module…');
  const work = h('div', { class: 'work', id: 'script-work' });
  ctx.main.classList.add('wide');
  ctx.onLeave(() => ctx.main.classList.remove('wide'));
  ctx.main.append(h('header', { class: 'pagehead' }, h('h1', {}, 'Scripts')),
    h('div', { class: 'split' }, h('aside', { class: 'modules' }, h('h2', {}, 'Modules'), list, newBtn), work));

  let modules = [];
  let editor = null;
  let diff = null;
  let current = null; // {module, version, code, entries, isNew}
  let dirty = false;
  const beforeUnload = (e) => { if (dirty) { e.preventDefault(); e.returnValue = ''; } };
  window.addEventListener('beforeunload', beforeUnload);
  ctx.guard(() => (dirty ? `${current.module} has unsaved changes. Leave and lose them?` : ''));
  ctx.onLeave(() => { window.removeEventListener('beforeunload', beforeUnload); editor?.destroy(); diff?.destroy(); });

  async function loadList() {
    try {
      modules = await get('/scripts');
    } catch (e) {
      clear(list, h('li', {}, problem(e, 'Modules')));
      return;
    }
    modules.sort((a, b) => a.module.localeCompare(b.module));
    clear(list, modules.length ? modules.map((m) => h('li', {},
      h('a', { href: '#/scripts/' + enc(m.module), 'aria-current': current && current.module === m.module ? 'true' : null, dataset: { module: m.module } },
        h('span', { class: 'name' }, m.module), h('span', { class: 'ver' }, 'v' + m.version),
        h('span', { class: 'entries' }, m.entries.map((e) => e.name).join(', ') || 'no entries'))))
      : h('li', { class: 'dim' }, 'No module yet.'));
  }

  newBtn.addEventListener('click', async () => {
    const name = h('input', { id: 'new-module-name', placeholder: 'pumps', 'aria-label': 'Module name', required: true });
    const msg = h('p', { class: 'error' });
    const d = h('dialog', { class: 'dlg' }, h('h2', {}, 'New module'),
      h('form', { method: 'dialog', onsubmit: (ev) => {
        if (!NAME_RE.test(name.value)) { ev.preventDefault(); msg.textContent = 'A module name is a letter, then letters, digits or _ (at most 64).'; return; }
        if (modules.some((m) => m.module === name.value)) { ev.preventDefault(); msg.textContent = `Module ${name.value} exists: open it from the list.`; return; }
      } }, h('label', {}, 'Name ', name), msg,
      h('div', { class: 'actions' }, h('button', { type: 'button', class: 'ghost', onclick: () => d.close('') }, 'Cancel'), h('button', { class: 'primary', value: 'ok' }, 'Create'))));
    d.addEventListener('close', () => {
      const v = d.returnValue === 'ok' ? name.value : '';
      d.remove();
      if (v) openNew(v);
    });
    document.body.append(d);
    d.showModal();
  });

  function openNew(module) {
    current = { module, version: 0, code: TEMPLATE, entries: [], isNew: true };
    renderWork();
  }

  async function open(module) {
    clear(work, h('p', { class: 'dim' }, `Loading ${module}…`));
    try {
      const sc = await get('/scripts/' + enc(module));
      current = { module: sc.module, version: sc.version, saved: sc.saved, code: sc.code, entries: sc.entries || [], liveview: sc.liveview || [] };
    } catch (e) {
      clear(work, problem(e, `Module ${module}`));
      return;
    }
    renderWork();
    loadList();
  }

  function renderWork() {
    editor?.destroy();
    diff?.destroy();
    diff = null;
    dirty = false;
    const c = current;
    const title = h('h2', { id: 'module-title' }, c.module, ' ',
      c.isNew ? h('span', { class: 'pill q-uncertain' }, 'new, not saved')
        : h('span', { class: 'pill', id: 'module-version', dataset: { version: String(c.version) } }, `v${c.version} runs`),
      c.saved ? h('span', { class: 'dim small' }, ` saved ${fmtTime(c.saved)}`) : null);
    const dirtyMark = h('span', { class: 'dirty', id: 'dirty', hidden: true }, '● unsaved changes');
    const lintLabel = h('span', { class: 'lintlabel', id: 'lint-label' }, 'Lint: …');
    const saveBtn = h('button', { type: 'button', class: 'primary', id: 'save', title: 'Save as a new version (Ctrl+S)' }, 'Save');
    const versionSel = h('select', { id: 'compare-version', 'aria-label': 'Version to compare with' });
    const compareBtn = h('button', { type: 'button', id: 'compare', disabled: c.isNew }, 'Compare');
    const rollbackBtn = h('button', { type: 'button', id: 'rollback', class: 'danger', disabled: c.isNew || c.version <= 1 }, 'Roll back…');
    const revertBtn = h('button', { type: 'button', id: 'revert', class: 'ghost', title: 'Put back the saved version in the editor' }, 'Discard');
    const saveMsg = h('div', { id: 'save-result', 'aria-live': 'polite' });
    const edHost = h('div', { class: 'editor', id: 'editor' });
    const diffHost = h('div', { class: 'diffhost', id: 'diff', hidden: true });
    const diags = h('ol', { class: 'diags', id: 'diagnostics', 'aria-label': 'Lint diagnostics', 'aria-live': 'polite' });

    // Run panel.
    const entrySel = h('select', { id: 'run-entry', 'aria-label': 'Entry' }, (c.entries || []).map((e) => h('option', { value: e.name }, `${e.name} (timeout ${e.timeout_ms} ms)`)));
    const args = h('textarea', { id: 'run-args', rows: 3, spellcheck: 'false', 'aria-label': 'Arguments (JSON)' }, '{}');
    const argsMsg = h('span', { class: 'error', id: 'run-args-error' });
    const runBtn = h('button', { type: 'button', class: 'primary', id: 'run', disabled: c.isNew || !(c.entries || []).length, title: 'Ctrl+Enter' }, 'Run');
    const runOut = h('div', { id: 'run-result', class: 'runout', 'aria-live': 'polite' });

    clear(work,
      h('div', { class: 'toolbar' }, title, dirtyMark, h('span', { class: 'spacer' }), lintLabel),
      h('div', { class: 'toolbar' }, saveBtn, revertBtn, h('span', { class: 'sep' }), h('label', {}, 'Compare with ', versionSel), compareBtn, rollbackBtn),
      saveMsg, edHost, diffHost,
      h('details', { class: 'diagbox', open: true }, h('summary', {}, 'Diagnostics'), diags),
      h('section', { class: 'block run', 'aria-labelledby': 'run-h' }, h('h2', { id: 'run-h' }, 'Run an entry'),
        h('p', { class: 'dim small' }, 'Runs the saved version on the appliance with your session\'s grant (audited, origin console); unsaved changes are not run.'),
        h('div', { class: 'runform' }, h('label', {}, 'Entry ', entrySel), h('label', { class: 'grow' }, 'Args (JSON) ', args), runBtn), argsMsg, runOut));

    editor = createEditor(edHost, {
      doc: c.code,
      lint: (code) => post('/scripts/lint', { code }),
      onLint: (res) => {
        if (res instanceof Error) {
          lintLabel.textContent = 'Lint failed: ' + errText(res);
          lintLabel.className = 'lintlabel q-bad';
          return;
        }
        lintLabel.dataset.linter = res.linter;
        lintLabel.className = 'lintlabel';
        lintLabel.textContent = `Lint: ${res.linter}${res.linter === 'syntax-only' ? ' (ruff not found: syntax and guardrail checks only)' : ''} · ${res.diagnostics.length} finding${res.diagnostics.length === 1 ? '' : 's'}`;
        clear(diags, res.diagnostics.length
          ? res.diagnostics.map((d) => h('li', { class: 'sev-' + d.severity, dataset: { line: String(d.line), column: String(d.column), severity: d.severity } },
            h('button', { type: 'button', class: 'link', onclick: () => editor.goto(d.line, d.column) }, `line ${d.line}, column ${d.column}`),
            `: ${d.message}`, d.code ? h('code', {}, ' ' + d.code) : null))
          : h('li', { class: 'dim', dataset: { none: '1' } }, 'No findings.'));
      },
      onChange: (code) => { dirty = code !== c.code || !!c.isNew; dirtyMark.hidden = !dirty; },
      keys: { save: () => saveBtn.click(), run: () => runBtn.click() },
    });
    dirty = !!c.isNew;
    dirtyMark.hidden = !dirty;

    saveBtn.addEventListener('click', () => busy(saveBtn, async () => {
      clear(saveMsg);
      let saved;
      try {
        saved = await put('/scripts/' + enc(c.module), { code: editor.code });
      } catch (e) {
        clear(saveMsg, problem(e, 'Not saved'));
        return;
      }
      toast(`Saved ${saved.module} version ${saved.version}: it runs now.`);
      if (c.isNew) location.hash = '#/scripts/' + enc(saved.module);
      await open(saved.module);
      clear(document.getElementById('save-result') || saveMsg, h('p', { class: 'ok', id: 'saved-note' }, `Saved as version ${saved.version}; entries: ${saved.entries.map((e) => e.name).join(', ') || 'none'}.`));
    }));
    revertBtn.addEventListener('click', () => { editor.code = c.code; });

    if (!c.isNew) {
      get(`/scripts/${enc(c.module)}/versions`).then((vs) => {
        clear(versionSel, vs.filter((v) => !v.latest).reverse().map((v) => h('option', { value: String(v.version), title: fmtTime(v.saved) },
          `v${v.version} · ${fmtTime(v.saved).slice(5, 16)}`)));
        compareBtn.disabled = versionSel.options.length === 0;
        if (!versionSel.options.length) versionSel.append(h('option', { value: '' }, 'no earlier version'));
      }).catch((e) => clear(saveMsg, problem(e, 'Versions')));
    }
    compareBtn.addEventListener('click', () => busy(compareBtn, async () => {
      const v = versionSel.value;
      if (!v) return;
      let old;
      try {
        old = await get(`/scripts/${enc(c.module)}/versions/${v}`);
      } catch (e) {
        clear(saveMsg, problem(e, 'Compare'));
        return;
      }
      diff?.destroy();
      diffHost.hidden = false;
      edHost.hidden = true;
      const restore = h('button', { type: 'button', id: 'restore' }, `Restore v${old.version} as a new version`);
      const close = h('button', { type: 'button', class: 'ghost', id: 'diff-close' }, 'Close the comparison');
      clear(diffHost, h('div', { class: 'toolbar' }, h('strong', {}, `v${old.version} (left) against the editor (right)`), h('span', { class: 'spacer' }), restore, close));
      const host = h('div', { class: 'merge' });
      diffHost.append(host);
      diff = createDiff(host, old.code, editor.code);
      close.addEventListener('click', () => { diff?.destroy(); diff = null; diffHost.hidden = true; edHost.hidden = false; compareBtn.focus(); });
      close.focus();
      restore.addEventListener('click', async () => {
        if (!await confirm('Restore an earlier version', `Save the code of v${old.version} as a new version of ${c.module}? It runs at once.`, 'Restore')) return;
        await busy(restore, async () => {
          try {
            const saved = await put('/scripts/' + enc(c.module), { code: old.code });
            toast(`Restored v${old.version} as version ${saved.version}.`);
            await open(c.module);
          } catch (e) {
            clear(saveMsg, problem(e, 'Not restored'));
          }
        });
      });
    }));
    rollbackBtn.addEventListener('click', async () => {
      if (!await confirm('Roll back', `Withdraw version ${c.version} of ${c.module}? Version ${c.version - 1} runs again, and version ${c.version} is removed from the store (its number is not reused).`, 'Roll back', true)) return;
      await busy(rollbackBtn, async () => {
        try {
          const r = await post(`/scripts/${enc(c.module)}/rollback`);
          toast(`Rolled back: ${r.module} version ${r.version} runs again.`);
          await open(c.module);
        } catch (e) {
          clear(saveMsg, problem(e, 'Not rolled back'));
        }
      });
    });

    runBtn.addEventListener('click', () => busy(runBtn, async () => {
      argsMsg.textContent = '';
      let a;
      try {
        a = args.value.trim() ? JSON.parse(args.value) : null;
      } catch (e) {
        argsMsg.textContent = 'Args are not JSON: ' + e.message;
        args.focus();
        return;
      }
      clear(runOut, h('p', { class: 'dim' }, `Running ${c.module}.${entrySel.value}…`));
      const t0 = performance.now();
      try {
        const r = await post(`/scripts/${enc(c.module)}/${enc(entrySel.value)}/run`, { args: a });
        clear(runOut, h('div', { class: 'ok', id: 'run-ok', dataset: { duration: String(r.duration_ms) } },
          h('p', {}, h('strong', {}, 'Returned'), ` in ${r.duration_ms} ms`),
          h('h4', {}, 'Result'), h('pre', { id: 'run-value' }, JSON.stringify(r.result, null, 2)),
          h('h4', {}, `Logs (${r.logs.length})`),
          r.logs.length ? h('pre', { id: 'run-logs' }, r.logs.map((l) => `${l.level.toUpperCase().padEnd(7)} ${l.msg}`).join('\n')) : h('p', { class: 'dim' }, 'Nothing logged.')));
      } catch (e) {
        const ms = Math.round(performance.now() - t0);
        clear(runOut, h('div', { id: 'run-failed', dataset: { kind: e instanceof ApiError ? e.kind : '' } },
          h('p', {}, h('strong', {}, 'Did not return: '), h('code', {}, e instanceof ApiError ? e.kind || 'error' : 'error'), ` after ${ms} ms`),
          problem(e, 'Run')));
      }
    }));
  }

  await loadList();
  if (ctx.params[0]) await open(ctx.params[0]);
  else clear(work, h('p', { class: 'dim' }, modules.length ? 'Choose a module on the left, or make a new one.' : 'No module yet: make a new one.'));
}
