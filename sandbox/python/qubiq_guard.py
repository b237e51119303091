"""The script guardrail of a QUBIQ Edge worker (docs/security.md, "The script sandbox").

It is a guardrail, not a security boundary: it keeps an ordinary script away
from files, network and processes and tells it why, and it keeps one run from
changing what the next run sees. The boundary is on the Go side (scopes, write
levels, cgroups). Layers, cheapest first:

* check_tree: an AST pass at save time and again before compiling in the
  worker. It refuses attribute names beginning with "_", frame and code
  attributes (gi_frame, f_globals, co_code, ...), and every name a script
  defines or uses that begins with "__" (parameters of every kind included,
  positional-only ones too: no name can shadow the hooks below, which all
  begin with "__"). Class patterns (match) obey the same attribute rule for
  their keyword attributes, and take positional sub-patterns only for the
  builtin types that match the subject itself. At save time it also refuses imports whose root is not on
  the allow-list.
* transform: rewrites attribute stores and deletes (x.a = v, del x.a,
  x.a += v) to pass the object through __qubiq_w__, which refuses modules,
  classes and functions the run did not create and module-level objects of
  allowed modules; and attribute loads of .format / .format_map to
  __qubiq_fmt__, which formats strings without letting a field reach a
  forbidden attribute ("{0.__class__}").
* Restricted builtins: no open, exec, eval, compile, input, breakpoint,
  globals, locals, vars, help, memoryview; getattr, setattr, delattr and
  hasattr refuse forbidden names built at run time; __import__ checks the
  root name of imports the script makes (its import statements) against the
  allow-list and returns read-only proxies made fresh for each run; an
  import the standard library's C code makes on the script's behalf
  (datetime.strptime imports _strptime, strftime imports time) is its own
  business and gets the real module (Run.gated_import).
* ModuleProxy: a read-only view of an allowed module that exposes only its
  public attributes that are not other modules, loaders or capsules
  (submodules of the same package are exposed as proxies in turn). Module
  data held in containers (dicts, lists, sets, bytearrays, tuples, ...) is
  handed out as the run's own deep copy: d[k] = v on it changes nothing
  the next run sees.
* An audit hook (PEP 578), active only while a script runs, refusing process,
  network and file events outside the readable directories.

Standard library only.
"""

import array
import ast
import builtins
import collections
import collections.abc
import copy
import importlib
import opcode
import os
import string
import sys
import types
import warnings

import _string

FORBIDDEN_ATTRS = frozenset({
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
    "tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins",
    "f_code", "f_trace", "mro",
})

REMOVED_BUILTINS = frozenset({
    "open", "exec", "eval", "compile", "input", "breakpoint", "globals", "locals",
    "vars", "help", "exit", "quit", "memoryview", "copyright", "credits", "license",
    "__loader__", "__spec__",
})

HOOK_W = "__qubiq_w__"
HOOK_FMT = "__qubiq_fmt__"


class ForbiddenAttributeError(Exception):
    """An attribute that scripts may not use (it is not an AttributeError, so
    getattr's default and hasattr do not hide it)."""


def attr_forbidden(name):
    """Return why the attribute name is refused, or None."""
    if name.startswith("_"):
        return "attribute names beginning with '_' are not available in scripts"
    if name in FORBIDDEN_ATTRS or name.startswith("co_"):
        return "frame and code attributes are not available in scripts"
    return None


def check_attr_name(name):
    """Return name as a plain str, or raise ForbiddenAttributeError. A str
    subclass is converted first: its own startswith could lie."""
    if not isinstance(name, str):
        raise TypeError("attribute name must be a string")
    if type(name) is not str:
        name = str.__str__(name)
    why = attr_forbidden(name)
    if why:
        raise ForbiddenAttributeError("forbidden attribute %r: %s" % (name, why))
    return name


# ---------------------------------------------------------------- allow-list

def allow_list_text(allowed, installed):
    base = ", ".join(sorted(allowed))
    inst = ", ".join(sorted(installed)) if installed else "none"
    return "allowed: %s; installed packages: %s" % (base, inst)


# ---------------------------------------------------------------- AST check

def _col(lines, lineno, col_offset):
    """1-based character column from the AST's 0-based UTF-8 byte offset."""
    if lineno is None or col_offset is None:
        return 0
    try:
        raw = lines[lineno - 1].encode("utf-8")
        return len(raw[:col_offset].decode("utf-8", "replace")) + 1
    except IndexError:
        return col_offset + 1


def _diag(lines, node, code, message, severity="error"):
    line = getattr(node, "lineno", 1) or 1
    end_line = getattr(node, "end_lineno", None) or line
    col = _col(lines, line, getattr(node, "col_offset", 0))
    end_col = _col(lines, end_line, getattr(node, "end_col_offset", None)) or col
    return {"line": line, "column": col, "end_line": end_line, "end_column": end_col,
            "code": code, "message": message, "severity": severity}


class _Checker(ast.NodeVisitor):
    def __init__(self, lines, allowed, installed, check_imports):
        self.lines = lines
        self.allowed = allowed
        self.installed = installed
        self.check_imports = check_imports
        self.bound = set()
        self.diags = []

    def add(self, node, code, message):
        self.diags.append(_diag(self.lines, node, code, message))

    def name(self, node, name, what="name"):
        if name and name.startswith("__"):
            self.add(node, "forbidden-name",
                     "forbidden %s %r: names beginning with '__' are not available in scripts" % (what, name))

    def visit_Attribute(self, node):
        why = attr_forbidden(node.attr)
        if why:
            d = _diag(self.lines, node, "forbidden-attribute", "forbidden attribute %r: %s" % (node.attr, why))
            # Point at the attribute name, which ends the node.
            d["line"] = d["end_line"]
            d["column"] = max(1, d["end_column"] - len(node.attr))
            self.diags.append(d)
        self.generic_visit(node)

    def visit_Name(self, node):
        self.name(node, node.id)

    def visit_FunctionDef(self, node):
        self.name(node, node.name, "function name")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.name(node, node.name, "class name")
        self.generic_visit(node)

    def visit_arg(self, node):
        self.name(node, node.arg, "parameter name")
        self.generic_visit(node)

    def visit_keyword(self, node):
        self.name(node, node.arg, "keyword argument")
        self.generic_visit(node)

    def visit_Global(self, node):
        for n in node.names:
            self.name(node, n)

    visit_Nonlocal = visit_Global

    def visit_ExceptHandler(self, node):
        self.name(node, node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node):
        self.name(node, node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node):
        self.name(node, node.name)

    def visit_MatchMapping(self, node):
        self.name(node, node.rest)
        self.generic_visit(node)

    def visit_MatchClass(self, node):
        # A class pattern reads attributes with the interpreter's own
        # getattr: case object(__class__=c) is c = subject.__class__, out of
        # reach of the runtime guard. Keyword attribute names obey the rule
        # of attribute access; positional sub-patterns read the attributes
        # the class's __match_args__ names (which type("K", (), {...}) can
        # set to anything), so they are allowed only on the builtin types
        # that match the subject itself (case int(x)), under a name the
        # module never rebinds.
        for attr in node.kwd_attrs:
            why = attr_forbidden(attr)
            if why:
                self.add(node, "forbidden-attribute",
                         "forbidden attribute %r in a class pattern: %s" % (attr, why))
        if node.patterns:
            cls = node.cls
            if not (isinstance(cls, ast.Name) and cls.id in _SELF_MATCH and cls.id not in self.bound
                    and len(node.patterns) == 1):
                self.add(node, "forbidden-pattern",
                         "positional sub-patterns in class patterns are available only for %s (one each): "
                         "use keyword patterns such as case Point(x=x, y=y)" % ", ".join(sorted(_SELF_MATCH)))
        self.generic_visit(node)

    def _root(self, node, module):
        root = module.partition(".")[0]
        for part in module.split("."):
            if part.startswith("_"):
                self.add(node, "forbidden-import",
                         "forbidden import %r: private modules are not available in scripts" % module)
                return
        if self.check_imports and root not in self.allowed and root not in self.installed:
            self.add(node, "forbidden-import", "module %r is not available in scripts (%s)"
                     % (root, allow_list_text(self.allowed, self.installed)))

    def visit_Import(self, node):
        for a in node.names:
            self._root(node, a.name)
            self.name(node, a.asname)

    def visit_ImportFrom(self, node):
        if node.level:
            self.add(node, "forbidden-import", "relative imports are not available in scripts")
            return
        self._root(node, node.module or "")
        for a in node.names:
            if a.name == "*":
                self.add(node, "forbidden-import", "star imports are not available in scripts")
            elif a.name.startswith("_"):
                self.add(node, "forbidden-import",
                         "forbidden import of %r: names beginning with '_' are not available in scripts" % a.name)
            self.name(node, a.asname)


# Builtin types whose class pattern matches the subject itself (PEP 634):
# case int(x) binds x to the subject, reading no attribute.
_SELF_MATCH = frozenset({"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set",
                         "str", "tuple"})


def _bound_names(tree):
    """Every name the module binds anywhere (any scope)."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.alias):
            out.add(n.asname or n.name.partition(".")[0])
        elif isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.add(n.rest)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
    return out


def check_tree(tree, source, allowed=(), installed=(), check_imports=True):
    """Diagnostics (dicts) for everything the guardrail refuses in tree."""
    c = _Checker(source.splitlines(), set(allowed), set(installed), check_imports)
    try:
        c.bound = _bound_names(tree)
        c.visit(tree)
    except RecursionError:
        c.diags.append({"line": 1, "column": 1, "end_line": 1, "end_column": 1, "code": "too-complex",
                        "message": "the module is nested too deeply to check", "severity": "error"})
    return c.diags


def syntax_diag(e, code="syntax-error", severity="error"):
    line = e.lineno or 1
    col = e.offset or 1
    end_line = getattr(e, "end_lineno", None) or line
    end_col = getattr(e, "end_offset", None) or col
    if end_line < line or (end_line == line and end_col < col):
        end_line, end_col = line, col
    return {"line": line, "column": col, "end_line": end_line, "end_column": end_col,
            "code": code, "message": "%s: %s" % (type(e).__name__, e.msg), "severity": severity}


def parse(source, filename):
    """compile() the source (compiler-level errors included, docs/security.md, "The script sandbox")
    and parse it. Returns (tree or None, diagnostics)."""
    diags = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            compile(source, filename, "exec", dont_inherit=True)
        except SyntaxError as e:
            return None, [syntax_diag(e)]
        except (RecursionError, MemoryError, ValueError) as e:
            return None, [{"line": 1, "column": 1, "end_line": 1, "end_column": 1, "code": "syntax-error",
                           "message": "%s: %s" % (type(e).__name__, e), "severity": "error"}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # compile() reported them already
        tree = ast.parse(source, filename)
    for w in caught:
        if issubclass(w.category, (SyntaxWarning, DeprecationWarning)):
            line = w.lineno or 1
            diags.append({"line": line, "column": 1, "end_line": line, "end_column": 1,
                          "code": "syntax-warning", "message": "%s: %s" % (w.category.__name__, w.message),
                          "severity": "warning"})
    return tree, diags


def _where(lines, node):
    """node's place as a diagnostic gives it: line, column, end line and end column."""
    d = _diag(lines, node, "", "")
    return {k: d[k] for k in ("line", "column", "end_line", "end_column")}


def _timeout_of(fn, lines, diags):
    """The timeout_ms of @gateway(...) on fn (None when absent) and where
    that decorator is (None when fn has no @gateway)."""
    for d in fn.decorator_list:
        if isinstance(d, ast.Name) and d.id == "gateway":
            return None, _where(lines, d)
        if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "gateway":
            if d.args:
                diags.append(_diag(lines, d, "gateway-timeout",
                                   "@gateway takes keyword arguments only: @gateway(timeout_ms=2000)"))
            value = None
            for k in d.keywords:
                if k.arg != "timeout_ms":
                    diags.append(_diag(lines, k, "gateway-timeout",
                                       "@gateway has no argument %r (it takes timeout_ms)" % (k.arg,)))
                    continue
                v = k.value
                if (isinstance(v, ast.Constant) and isinstance(v.value, int)
                        and not isinstance(v.value, bool) and v.value > 0):
                    value = v.value
                else:
                    diags.append(_diag(lines, v, "gateway-timeout",
                                       "timeout_ms must be a positive integer literal (milliseconds)"))
            return value, _where(lines, d)
    return None, None


def _one_arg(fn):
    a = fn.args
    positional = len(a.posonlyargs) + len(a.args)
    required = positional - len(a.defaults)
    required_kw = sum(1 for d in a.kw_defaults if d is None)
    return (positional >= 1 or a.vararg is not None) and required <= 1 and required_kw == 0


def entries(tree, source, diags):
    """Entries of the module: top-level functions whose names do not begin
    with '_' and that take one positional argument, with their timeout_ms."""
    lines = source.splitlines()
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and _one_arg(node):
            ms, at = _timeout_of(node, lines, diags)
            e = {"name": node.name, "timeout_ms": ms, "line": node.lineno}
            if at is not None:
                e["gateway_at"] = at  # the @gateway line: where a warning about its timeout points
            out.append(e)
    return out


def unbound_decorators(tree, source):
    """The decorators, bare (@name) or called (@name(...)), whose name the
    module never binds and the builtins lack, each with its name and where
    it is. The check tells a typo of a known one (@gatway) from the rest:
    every run of the module would end in NameError."""
    lines = source.splitlines()
    bound = _bound_names(tree)
    out = []
    for n in ast.walk(tree):
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for d in n.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            if isinstance(target, ast.Name) and target.id not in bound and not hasattr(builtins, target.id):
                out.append(dict(_where(lines, target), name=target.id))
    return out


# ---------------------------------------------------------------- transform

class _Transformer(ast.NodeTransformer):
    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            call = ast.Call(func=ast.Name(id=HOOK_W, ctx=ast.Load()), args=[node.value], keywords=[])
            node.value = ast.copy_location(call, node.value)
            return node
        if node.attr in ("format", "format_map"):
            call = ast.Call(func=ast.Name(id=HOOK_FMT, ctx=ast.Load()),
                            args=[node.value, ast.Constant(value=node.attr)], keywords=[])
            return ast.copy_location(call, node)
        return node


def transform(tree):
    tree = _Transformer().visit(tree)
    return ast.fix_missing_locations(tree)


# ---------------------------------------------------------------- formatting

class _SafeFormatter(string.Formatter):
    def get_field(self, field_name, args, kwargs):
        _first, rest = _string.formatter_field_name_split(field_name)
        for is_attr, key in rest:
            if is_attr:
                check_attr_name(str(key))
        return super().get_field(field_name, args, kwargs)


_FORMATTER = _SafeFormatter()


def safe_format(s, *args, **kwargs):
    return _FORMATTER.vformat(s, args, kwargs)


def safe_format_map(s, mapping):
    return _FORMATTER.vformat(s, (), mapping)


def fmt_attr(obj, name):
    """obj.format / obj.format_map, safe for strings."""
    if isinstance(obj, str):
        if name == "format":
            return lambda *a, **kw: _FORMATTER.vformat(obj, a, kw)
        return lambda mapping: _FORMATTER.vformat(obj, (), mapping)
    if obj is str:
        return safe_format if name == "format" else safe_format_map
    return getattr(obj, name)


# ---------------------------------------------------------------- proxies

_IMPORTLIB_MODULES = frozenset({"importlib._bootstrap", "importlib._bootstrap_external",
                                "_frozen_importlib", "_frozen_importlib_external"})
_CAPSULE = type(getattr(__import__("datetime"), "datetime_CAPI", None))
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), frozenset, range)


def _hidden_value(v):
    """Why v is not handed to scripts as a module attribute, or None."""
    if isinstance(v, types.ModuleType):
        return "it is a module"
    if _CAPSULE is not type(None) and isinstance(v, _CAPSULE):
        return "it is a capsule"
    t = v if isinstance(v, type) else type(v)
    if getattr(t, "__module__", None) in _IMPORTLIB_MODULES:
        return "it is part of the import system"
    return None


class ModuleProxy:
    """Read-only view of an allowed module for one run."""

    __slots__ = ("_qmod", "_qroot", "_qrun")

    def __init__(self, *args, **kwargs):
        raise TypeError("module views cannot be created by scripts")

    @classmethod
    def _make(cls, mod, root, run):
        p = object.__new__(cls)
        object.__setattr__(p, "_qmod", mod)
        object.__setattr__(p, "_qroot", root)
        object.__setattr__(p, "_qrun", run)
        return p

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        mod = self._qmod
        try:
            v = getattr(mod, name)
        except AttributeError:
            raise AttributeError("module %r has no attribute %r" % (mod.__name__, name)) from None
        if isinstance(v, types.ModuleType):
            vn = getattr(v, "__name__", "")
            if vn.startswith(self._qroot + "."):
                return self._qrun.proxy(v, self._qroot)
        why = _hidden_value(v)
        if why:
            raise ForbiddenAttributeError("forbidden attribute %r of module %r: %s, and modules reached "
                                          "through attributes are not available in scripts"
                                          % (name, mod.__name__, why))
        if _module_data(v):
            return self._qrun.data_copy(mod, name, v)
        return v

    def __setattr__(self, name, value):
        raise ForbiddenAttributeError("cannot set %r: module %r is read-only in scripts" % (name, self._qmod.__name__))

    def __delattr__(self, name):
        raise ForbiddenAttributeError("cannot delete %r: module %r is read-only in scripts" % (name, self._qmod.__name__))

    def __dir__(self):
        out = []
        for n in dir(self._qmod):
            if n.startswith("_"):
                continue
            try:
                self.__getattr__(n)
            except (AttributeError, ForbiddenAttributeError):
                continue
            out.append(n)
        return out

    def __repr__(self):
        return "<module %r (script view)>" % self._qmod.__name__


_DATA = (dict, list, set, bytearray, tuple, frozenset, collections.deque, array.array,
         collections.abc.MutableMapping, collections.abc.MutableSequence, collections.abc.MutableSet)
_NOT_DATA = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
             str, bytes, int, float, complex, type(None), range)


def _module_data(v):
    """True when v is a container of module data that item assignment
    (d[k] = v, l.append(x)) could change for every later run: scripts get a
    copy of it instead (tuples and frozensets too, for what they hold)."""
    if isinstance(v, _NOT_DATA):
        return False
    return isinstance(v, _DATA) or hasattr(type(v), "__setitem__")


def shared_objects(mod):
    """ids of the mutable module-level objects of mod (other than classes,
    functions and modules, which the write guard refuses on their own)."""
    out = set()
    for v in list(vars(mod).values()):
        if isinstance(v, (_IMMUTABLE, type, types.ModuleType, types.FunctionType,
                          types.BuiltinFunctionType)):
            continue
        out.add(id(v))
    return out


# ---------------------------------------------------------------- audit hook

class Audit:
    """The audit hook's state. active is set only while script code runs;
    trusted > 0 while an allowed package imports itself."""

    REFUSED_PREFIXES = ("os.", "subprocess.", "shutil.", "socket.", "ctypes.", "mmap.", "gc.",
                        "sqlite3.", "urllib.", "http.", "ftplib.", "smtplib.", "poplib.", "imaplib.",
                        "nntplib.", "telnetlib.", "webbrowser.", "pty.", "signal.", "resource.",
                        "syslog.", "fcntl.", "tempfile.", "pickle.", "ensurepip.", "winreg.",
                        "_winapi.", "msvcrt.")
    REFUSED = frozenset({"sys.settrace", "sys.setprofile", "sys._current_frames",
                         "sys._current_exceptions", "sys.addaudithook", "code.__new__",
                         "function.__new__", "object.__getattr__", "cpython.remote_debugger_script"})
    PATH_CHECKED = frozenset({"os.listdir", "os.scandir"})
    WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def __init__(self, read_dirs):
        self.active = False
        self.trusted = 0
        self.read_dirs = tuple(sorted({os.path.realpath(d) for d in read_dirs if d}))

    def readable(self, path):
        if isinstance(path, int):
            return False
        try:
            p = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        for d in self.read_dirs:
            if p == d or p.startswith(d + os.sep):
                return True
        return False

    def hook(self, event, args):
        if not self.active or self.trusted:
            return
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if isinstance(mode, str) and any(c in mode for c in "wax+"):
                self.refuse(event, "files may not be written")
            if isinstance(flags, int) and flags & self.WRITE_FLAGS:
                self.refuse(event, "files may not be written")
            if not self.readable(path):
                self.refuse(event, "use system.files for files")
            return
        if event in self.PATH_CHECKED:
            path = args[0] if args else "."
            if not self.readable(path if path is not None else "."):
                self.refuse(event, "use system.files for files")
            return
        if event in self.REFUSED or event.startswith(self.REFUSED_PREFIXES):
            self.refuse(event, "scripts may not do this")

    @staticmethod
    def refuse(event, why):
        raise PermissionError("refused by the script sandbox: %s (%s)" % (event, why))


# ---------------------------------------------------------------- per run

_IMPORT_NAME = opcode.opmap["IMPORT_NAME"]


def _statement_import(frame):
    """True when frame, the frame __import__ was called in, is executing an
    import statement (IMPORT_NAME), not a call from C code."""
    try:
        return frame.f_code.co_code[frame.f_lasti] == _IMPORT_NAME
    except (AttributeError, IndexError):
        return True  # unknown: treat it as the script's, which is checked

def _plain(fn, name):
    """fn (a bound method of a guard object) as a plain function, so that
    a builtin's __self__ does not hand the guard's state to a script."""
    def call(*args, **kwargs):
        return fn(*args, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = None
    return call


class Run:
    """The guardrail state of one run: its globals, the classes it created,
    its module proxies and its builtins. A new Run is made for every run."""

    def __init__(self, env, system_obj, gateway):
        self.env = env
        self.classes = {}
        self.proxies = {}
        self.copies = {}
        self.globals = None
        self.system = system_obj
        b = dict(env.base_builtins)
        # Plain functions, not bound methods: no __self__ leads to the Run.
        b["__import__"] = _plain(self.gated_import, "__import__")
        b["__build_class__"] = _plain(self.build_class, "__build_class__")
        b["getattr"] = _plain(self.safe_getattr, "getattr")
        b["setattr"] = _plain(self.safe_setattr, "setattr")
        b["delattr"] = _plain(self.safe_delattr, "delattr")
        b["hasattr"] = _plain(self.safe_hasattr, "hasattr")
        b[HOOK_W] = _plain(self.write_guard, HOOK_W)
        b[HOOK_FMT] = fmt_attr
        b["system"] = system_obj
        b["gateway"] = gateway
        for name in ("math", "json", "datetime"):
            if name in env.allowed:
                b[name] = self.proxy(sys.modules[name], name)
        self.builtins = b

    def new_globals(self, name):
        self.globals = {"__builtins__": self.builtins, "__name__": name}
        return self.globals

    def proxy(self, mod, root):
        p = self.proxies.get(mod.__name__)
        if p is None:
            # Submodules reached through a view get the write guard's
            # protection of their module-level objects too.
            self.env.note_module(mod)
            p = ModuleProxy._make(mod, root, self)
            self.proxies[mod.__name__] = p
        return p

    def data_copy(self, mod, name, v):
        """This run's own deep copy of the module data mod.name (made on
        first access, kept for the run), so that item assignment changes
        nothing another run sees."""
        key = (mod.__name__, name)
        hit = self.copies.get(key)
        if hit is not None and hit[0] is v:
            return hit[1]
        try:
            c = copy.deepcopy(v)
        except Exception as e:  # noqa: BLE001 - anything that cannot be copied is not handed out
            raise ForbiddenAttributeError("forbidden attribute %r of module %r: it is shared module data "
                                          "that cannot be copied for scripts (%s)"
                                          % (name, mod.__name__, type(e).__name__)) from None
        self.copies[key] = (v, c)
        return c

    def gated_import(self, name, globals=None, locals=None, fromlist=(), level=0):
        # __import__ is reached through the script's builtins both by the
        # script's own import statements and by C code of the standard
        # library that the script called (PyImport_Import takes the
        # builtins of the running frame: datetime.strptime imports
        # _strptime, strftime and timetuple import time). Only the first
        # kind is the script's import: the allow-list checks it. Scripts
        # cannot name __import__ (names beginning with '__' are refused), so
        # a call that is not an import statement comes from the standard
        # library, which imports standard modules for itself.
        self.env.audit.trusted += 1  # reading the frame raises audit events of its own
        try:
            statement = _statement_import(sys._getframe(2))
        finally:
            self.env.audit.trusted -= 1
        if not statement:
            root = name.partition(".")[0]
            if level == 0 and root in sys.stdlib_module_names:
                self.env.audit.trusted += 1
                try:
                    return builtins.__import__(name, globals, locals, fromlist, 0)
                finally:
                    self.env.audit.trusted -= 1
            raise ImportError("module %r is not available in scripts (%s)"
                              % (root, allow_list_text(self.env.allowed, self.env.installed)))
        if level:
            raise ImportError("relative imports are not available in scripts")
        root = name.partition(".")[0]
        if root == "system":
            return self.system
        env = self.env
        if root not in env.allowed and root not in env.installed:
            raise ImportError("module %r is not available in scripts (%s)"
                              % (root, allow_list_text(env.allowed, env.installed)))
        if any(part.startswith("_") for part in name.split(".")):
            raise ImportError("forbidden import %r: private modules are not available in scripts" % name)
        env.audit.trusted += 1
        try:
            importlib.import_module(name)
        finally:
            env.audit.trusted -= 1
        mod = sys.modules[name] if fromlist else sys.modules[root]
        env.note_module(mod)
        return self.proxy(mod, root)

    def build_class(self, func, name, *bases, **kw):
        cls = builtins.__build_class__(func, name, *bases, **kw)
        self.classes[id(cls)] = cls
        return cls

    def write_guard(self, obj):
        if isinstance(obj, (ModuleProxy, types.ModuleType)):
            raise ForbiddenAttributeError("modules are read-only in scripts")
        if isinstance(obj, type):
            if self.classes.get(id(obj)) is obj:
                return obj
            raise ForbiddenAttributeError("cannot change class %r: only classes the script defines may be changed"
                                          % getattr(obj, "__qualname__", "?"))
        if isinstance(obj, types.FunctionType):
            if obj.__globals__ is self.globals:
                return obj
            raise ForbiddenAttributeError("cannot change a function the script did not define")
        if isinstance(obj, (types.BuiltinFunctionType, types.MethodType, types.MethodWrapperType,
                            types.WrapperDescriptorType, types.MethodDescriptorType,
                            types.GetSetDescriptorType, types.MemberDescriptorType)):
            raise ForbiddenAttributeError("cannot change %s objects in scripts" % type(obj).__name__)
        if id(obj) in self.env.shared:
            raise ForbiddenAttributeError("cannot change a module-level object of an allowed module")
        return obj

    def safe_getattr(self, obj, name, *default):
        name = check_attr_name(name)
        if name in ("format", "format_map") and (isinstance(obj, str) or obj is str):
            return fmt_attr(obj, name)
        return getattr(obj, name, *default)

    def safe_hasattr(self, obj, name):
        return hasattr(obj, check_attr_name(name))

    def safe_setattr(self, obj, name, value):
        setattr(self.write_guard(obj), check_attr_name(name), value)

    def safe_delattr(self, obj, name):
        delattr(self.write_guard(obj), check_attr_name(name))


class Env:
    """Per-worker guardrail state: the allow-list, the base builtins, the
    audit hook and the module-level objects of the allowed modules."""

    def __init__(self, allowed, installed, packages, read_dirs):
        self.allowed = frozenset(allowed)
        self.packages = packages
        # Top-level import names of the installed packages, read by the
        # daemon from each wheel's top_level.txt or RECORD.
        self.installed = frozenset(n for n in installed if n.isidentifier() and not n.startswith("_"))
        self.audit = Audit(read_dirs)
        self.shared = set()
        self._noted = set()
        b = dict(vars(builtins))
        for n in REMOVED_BUILTINS:
            b.pop(n, None)
        self.base_builtins = b
        for name in ("math", "json", "datetime"):
            if name in self.allowed:
                self.note_module(importlib.import_module(name))

    def note_module(self, mod):
        if mod.__name__ in self._noted:
            return
        self._noted.add(mod.__name__)
        self.shared |= shared_objects(mod)

    def install_audit_hook(self):
        sys.addaudithook(self.audit.hook)
