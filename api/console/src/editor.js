// The script editor: CodeMirror 6 with Python highlighting, line numbers,
// bracket matching, search, undo history, and in-editor lint (the
// appliance's POST /scripts/lint: ruff, or the syntax-only check without
// it) shown inline at the line and column of each diagnostic. And the
// side-by-side diff of two versions (@codemirror/merge).
import { EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
  highlightSpecialChars, rectangularSelection } from '@codemirror/view';
import { EditorState } from '@codemirror/state';
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { python } from '@codemirror/lang-python';
import { syntaxHighlighting, defaultHighlightStyle, indentOnInput, bracketMatching, foldGutter, foldKeymap, indentUnit } from '@codemirror/language';
import { linter, lintGutter, lintKeymap, forceLinting } from '@codemirror/lint';
import { searchKeymap, highlightSelectionMatches } from '@codemirror/search';
import { closeBrackets, closeBracketsKeymap } from '@codemirror/autocomplete';
import { MergeView } from '@codemirror/merge';

// toCM turns one of the appliance's diagnostics (1-based line and column,
// end_line/end_column 0 when unknown) into a CodeMirror range.
export function toCM(doc, d, linterName) {
  const ln = Math.min(Math.max(d.line || 1, 1), doc.lines);
  const line = doc.line(ln);
  const from = Math.min(line.from + Math.max((d.column || 1) - 1, 0), line.to);
  let to = from;
  if (d.end_line > 0) {
    const el = doc.line(Math.min(d.end_line, doc.lines));
    to = Math.min(el.from + Math.max((d.end_column || 1) - 1, 0), el.to);
  }
  if (to <= from) to = Math.min(from + 1, line.to);
  if (to < from) to = from;
  const severity = d.severity === 'warning' ? 'warning' : d.severity === 'info' ? 'info' : 'error';
  return { from, to, severity, message: d.message, source: linterName + (d.code ? ' ' + d.code : '') };
}

const baseTheme = EditorView.theme({
  '&': { height: '100%', fontSize: '14px' },
  '.cm-scroller': { fontFamily: '"DejaVu Sans Mono", ui-monospace, monospace', lineHeight: '1.45' },
  '.cm-content': { caretColor: '#0b57d0' },
});

// nonce is the page's CSP nonce (index.html's meta csp-nonce, new with
// each answer): CodeMirror's <style> element carries it.
const nonce = document.querySelector('meta[name="csp-nonce"]')?.content || '';

const readOnly = [EditorState.readOnly.of(true), EditorView.editable.of(false)];

function common() {
  return [lineNumbers(), highlightSpecialChars(), drawSelection(), highlightActiveLine(), highlightActiveLineGutter(),
    foldGutter(), syntaxHighlighting(defaultHighlightStyle, { fallback: true }), bracketMatching(), python(),
    indentUnit.of('    '), EditorState.tabSize.of(4), baseTheme, EditorView.cspNonce.of(nonce)];
}

// createEditor makes the editor in parent. opts: doc; lint(code) →
// Promise<{linter, diagnostics}>; onLint(result | Error) after each lint;
// onChange(code); keys: {save, run} (Mod-s, Mod-Enter).
export function createEditor(parent, opts) {
  const lintSource = async (view) => {
    const code = view.state.doc.toString();
    let res;
    try {
      res = await opts.lint(code);
    } catch (e) {
      opts.onLint?.(e);
      return [];
    }
    if (view.state.doc.toString() !== code) return []; // stale: a newer lint follows
    opts.onLint?.(res);
    return res.diagnostics.map((d) => toCM(view.state.doc, d, res.linter));
  };
  const view = new EditorView({
    parent,
    state: EditorState.create({
      doc: opts.doc || '',
      extensions: [
        ...common(), history(), indentOnInput(), closeBrackets(), rectangularSelection(), highlightSelectionMatches(),
        linter(lintSource, { delay: 400 }), lintGutter(),
        keymap.of([
          { key: 'Mod-s', preventDefault: true, run: () => { opts.keys?.save?.(); return true; } },
          { key: 'Mod-Enter', preventDefault: true, run: () => { opts.keys?.run?.(); return true; } },
          ...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...foldKeymap, ...lintKeymap, indentWithTab,
        ]),
        EditorView.updateListener.of((u) => { if (u.docChanged) opts.onChange?.(u.state.doc.toString()); }),
        EditorView.contentAttributes.of({ 'aria-label': 'Python source of the module (Escape then Tab leaves the editor)' }),
      ],
    }),
  });
  return {
    view,
    get code() { return view.state.doc.toString(); },
    set code(text) { view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }); },
    lintNow() { forceLinting(view); },
    goto(line, column) {
      const doc = view.state.doc;
      const l = doc.line(Math.min(Math.max(line, 1), doc.lines));
      const pos = Math.min(l.from + Math.max(column - 1, 0), l.to);
      view.dispatch({ selection: { anchor: pos }, scrollIntoView: true });
      view.focus();
    },
    focus() { view.focus(); },
    destroy() { view.destroy(); },
  };
}

// createDiff shows a (older, left) against b (right) side by side, both
// read-only, changes highlighted.
export function createDiff(parent, a, b) {
  return new MergeView({
    parent,
    a: { doc: a, extensions: [...common(), ...readOnly] },
    b: { doc: b, extensions: [...common(), ...readOnly] },
    highlightChanges: true,
    gutter: true,
    collapseUnchanged: { margin: 3, minSize: 6 },
  });
}
