"""Bootstrap of a QUBIQ Edge Python worker.

Started by the daemon as `python -I -S qubiq_worker.py <code-dir>` with the
transport on fds 3 (worker -> daemon) and 4 (daemon -> worker). It answers
the daemon's hello with ready, then runs one exec at a time: each run gets a
fresh module namespace, fresh builtins and fresh module proxies
(qubiq_guard.Run), so nothing a run does is seen by the next. The worker
exits when fd 4 reaches EOF or on any protocol violation.

Standard library only.
"""

import sys

if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])

import base64
import datetime as _dt
import functools
import itertools
import json
import linecache
import math  # noqa: F401  (pre-imported: an allowed module)
import os
import traceback

import qubiq_guard as guard
import qubiq_rpc as rpc

_UTC = _dt.timezone.utc


class PermissionDenied(Exception):
    """A system.* call was refused; the message names the missing scope or level."""


class CallError(Exception):
    """A system.* call failed in the daemon; the message says why."""


class QualifiedValue:
    """One tag read: .value, .quality (a quality name such as "Good"),
    .timestamp (an aware UTC datetime, parsed when first read), .path and
    .reason."""

    __slots__ = ("path", "value", "quality", "reason", "_ts")

    def __init__(self, path, value, quality, timestamp, reason):
        self.path = path
        self.value = value
        self.quality = quality
        self.reason = reason
        self._ts = timestamp  # a str until first read

    @property
    def timestamp(self):
        t = self._ts
        if type(t) is str:
            t = self._ts = _parse_time(t)
        return t

    def __repr__(self):
        return "QualifiedValue(path=%r, value=%r, quality=%r, timestamp=%r)" % (
            self.path, self.value, self.quality, self.timestamp)


def _from_columns(paths, c):
    """QualifiedValues from the column answer of tag.read (sandbox/METHODS.md):
    the tuple (values, quality, time, reasons), quality and time one str or a
    list, reasons None or {index: reason}."""
    n = len(paths)
    v, q, t, r = c
    if len(v) != n or (type(q) is list and len(q) != n) or (type(t) is list and len(t) != n):
        raise CallError("system.tag.read: the daemon answered %d values for %d paths" % (len(v), n))
    if n == 1:
        out = [QualifiedValue(paths[0], v[0], q if type(q) is not list else q[0],
                              t if type(t) is not list else t[0], None)]
    else:
        if type(q) is not list:
            q = _repeat(q, n)
        if type(t) is not list:
            t = _repeat(t, n)
        out = list(map(QualifiedValue, paths, v, q, t, _repeat(None, n)))
    if r:
        for i, reason in r.items():
            out[i].reason = reason
    return out


_repeat = itertools.repeat


@functools.lru_cache(maxsize=512)
def _parse_time(s):
    if not s:
        return None
    try:
        t = _dt.datetime.fromisoformat(s)
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_UTC)
    return t.astimezone(_UTC)


def _json_default(o):
    if isinstance(o, _dt.datetime):
        if o.tzinfo is None:
            o = o.replace(tzinfo=_UTC)
        return o.astimezone(_UTC).isoformat().replace("+00:00", "Z")
    if isinstance(o, (_dt.date, _dt.time)):
        return o.isoformat()
    if isinstance(o, QualifiedValue):
        return {"path": o.path, "value": o.value, "quality": o.quality,
                "timestamp": _json_default(o.timestamp) if o.timestamp else None, "reason": o.reason}
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)


def _arg_default(o):
    """Arguments of system.* calls: datetimes and bytes as the tagged values
    of sandbox/METHODS.md ({"$dt": RFC 3339 UTC}, {"$bytes": base64})."""
    if isinstance(o, _dt.datetime):
        if o.tzinfo is None:
            o = o.replace(tzinfo=_UTC)
        return {"$dt": o.astimezone(_UTC).isoformat().replace("+00:00", "Z")}
    if isinstance(o, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(o)).decode("ascii")}
    return _json_default(o)


def _untag(v):
    """Results of system.* calls: the tagged values of sandbox/METHODS.md back
    into datetime (UTC), bytes and float."""
    if type(v) is list:
        return [_untag(x) for x in v]
    if type(v) is dict:
        if len(v) == 1:
            k, x = next(iter(v.items()))
            if k == "$dt" and type(x) is str:
                t = _parse_time(x)
                if t is not None:
                    return t
            elif k == "$bytes" and type(x) is str:
                try:
                    return base64.b64decode(x, validate=True)
                except ValueError:
                    pass
            elif k == "$float" and x in ("nan", "inf", "-inf"):
                return float(x)
        return {k: _untag(x) for k, x in v.items()}
    return v


def _dumps(v):
    return json.dumps(v, allow_nan=False, default=_json_default, ensure_ascii=False, separators=(",", ":"))


class _Namespace:
    """A read-only group of system.* functions."""

    __slots__ = ("_call",)

    def __init__(self, call):
        object.__setattr__(self, "_call", call)

    def __setattr__(self, name, value):
        raise guard.ForbiddenAttributeError("system functions are read-only")

    def __delattr__(self, name):
        raise guard.ForbiddenAttributeError("system functions are read-only")


def _paths(paths, what):
    if isinstance(paths, str):
        raise TypeError("%s takes a list of tag paths, not a string" % what)
    out = list(paths)
    for p in out:
        if not isinstance(p, str):
            raise TypeError("%s: tag paths are strings" % what)
    return out


def _call_tail(method, raw):
    """The end of a call frame of method with params already encoded (raw)."""
    return b',"method":"%s","params":%s}' % (method.encode("ascii"), raw)


class _Tag(_Namespace):
    # _rc caches the last path list read and the end of its call frame: a
    # script that polls the same tags in a loop does not pay for encoding
    # them each time.
    __slots__ = ("_rc",)

    def __init__(self, call):
        _Namespace.__init__(self, call)
        object.__setattr__(self, "_rc", None)

    def read(self, paths):
        """Read tags: a list of QualifiedValue, one per path, in order."""
        rc = self._rc
        if rc is not None and type(paths) is list and rc[0] == paths:
            paths, tail = rc
        else:
            paths = _paths(paths, "system.tag.read")
            tail = _call_tail("tag.read", rpc.dumps({"paths": paths}))
            object.__setattr__(self, "_rc", (paths, tail))
        res = self._call("tag.read", None, tail)
        if type(res) is tuple:
            return _from_columns(paths, res)
        return [QualifiedValue(r.get("path"), r.get("value"), r.get("quality"),
                               r.get("timestamp"), r.get("reason")) for r in res]

    def write(self, paths, values):
        """Write tags: a list of quality names ("Good" when written), one per path."""
        paths = _paths(paths, "system.tag.write")
        values = list(values)
        if len(values) != len(paths):
            raise ValueError("system.tag.write: %d paths but %d values" % (len(paths), len(values)))
        return list(self._call("tag.write", {"paths": paths, "values": values}))

    def browse(self, path=""):
        return self._call("tag.browse", {"path": path})


class _DB(_Namespace):
    __slots__ = ()

    def runNamedQuery(self, name, params=None, database=None):
        return self._call("db.runNamedQuery", {"name": name, "params": params, "database": database})

    def runQuery(self, sql, args=None, database=None, tx=None):
        return self._call("db.runQuery", {"sql": sql, "args": args, "database": database, "tx": tx})

    def callProc(self, name, args=None, database=None, tx=None):
        return self._call("db.callProc", {"name": name, "args": args, "database": database, "tx": tx})

    def beginTransaction(self, database=None, isolation=None, timeoutMs=60000):
        return self._call("db.beginTransaction", {"database": database, "isolation": isolation,
                                                  "timeoutMs": timeoutMs})

    def commitTransaction(self, tx):
        return self._call("db.commitTransaction", {"tx": tx})

    def rollbackTransaction(self, tx):
        return self._call("db.rollbackTransaction", {"tx": tx})

    def closeTransaction(self, tx):
        return self._call("db.closeTransaction", {"tx": tx})


class _Hist(_Namespace):
    __slots__ = ()

    def getTrends(self, paths, start, end, intervalMs=None, aggregate="raw"):
        return self._call("hist.getTrends", {"paths": _paths(paths, "system.hist.getTrends"),
                                             "start": start, "end": end,
                                             "intervalMs": intervalMs, "aggregate": aggregate})


class _Vars(_Namespace):
    __slots__ = ()

    def get(self, key, default=None):
        r = self._call("vars.get", {"key": key})
        return default if r is None else r

    def set(self, key, value):
        return self._call("vars.set", {"key": key, "value": value})

    def delete(self, key):
        return self._call("vars.delete", {"key": key})

    def incr(self, key, by=1):
        return self._call("vars.incr", {"key": key, "by": by})

    def keys(self, prefix=""):
        return self._call("vars.keys", {"prefix": prefix})

    def list(self, prefix=""):
        return self._call("vars.list", {"prefix": prefix})


class _Files(_Namespace):
    __slots__ = ()

    def read(self, path):
        return self._call("files.read", {"path": path})

    def size(self, path):
        return self._call("files.size", {"path": path})

    def readChunk(self, path, offset, length):
        return self._call("files.readChunk", {"path": path, "offset": offset, "length": length})

    def save(self, path, data):
        return self._call("files.save", {"path": path, "data": data})

    def delete(self, path):
        return self._call("files.delete", {"path": path})


class _Message(_Namespace):
    __slots__ = ()

    def send(self, handler, payload=None):
        return self._call("message.send", {"handler": handler, "payload": payload})


class _Script(_Namespace):
    __slots__ = ()

    def runOnGateway(self, entry, args=None):
        return self._call("script.runOnGateway", {"entry": entry, "args": args})


def _ids(ids):
    """Alarm ids: one str or a list of them."""
    if ids is None:
        return None
    if isinstance(ids, str):
        return [ids]
    return list(ids)


class _Alarm(_Namespace):
    __slots__ = ()

    def queryStatus(self, state=None, priority=None, prefix=None, includeNormal=False):
        return self._call("alarm.queryStatus", {"state": state, "priority": priority, "prefix": prefix,
                                                "includeNormal": includeNormal})

    def queryJournal(self, start=None, end=None, path=None, priority=None, state=None, limit=100, after=None):
        return self._call("alarm.queryJournal", {"start": start, "end": end, "path": path, "priority": priority,
                                                 "state": state, "limit": limit, "after": after})

    def acknowledge(self, ids=None, all=False):
        return self._call("alarm.acknowledge", {"ids": _ids(ids), "all": all})

    def shelve(self, ids, seconds=None, oneShot=False):
        return self._call("alarm.shelve", {"ids": _ids(ids), "seconds": seconds, "oneShot": oneShot})

    def unshelve(self, ids):
        return self._call("alarm.unshelve", {"ids": _ids(ids)})

    def addNote(self, id, text):
        return self._call("alarm.addNote", {"id": id, "text": text})


class _System:
    """The system builtin of one run."""

    __slots__ = ("tag", "db", "hist", "vars", "files", "message", "script", "alarm")
    PermissionDenied = PermissionDenied
    CallError = CallError

    def __init__(self, call):
        for name, cls in (("tag", _Tag), ("db", _DB), ("hist", _Hist), ("vars", _Vars),
                          ("files", _Files), ("message", _Message), ("script", _Script), ("alarm", _Alarm)):
            object.__setattr__(self, name, cls(call))

    def __setattr__(self, name, value):
        raise guard.ForbiddenAttributeError("system is read-only")

    def __delattr__(self, name):
        raise guard.ForbiddenAttributeError("system is read-only")

    def __repr__(self):
        return "<system>"


def gateway(fn=None, *, timeout_ms=None):
    """@gateway or @gateway(timeout_ms=N): marks a gateway entry; the daemon
    reads timeout_ms from the module's source when it is saved."""
    if fn is not None:
        if callable(fn):
            return fn
        raise TypeError("@gateway takes keyword arguments only: @gateway(timeout_ms=2000)")
    return lambda f: f


class Fatal(Exception):
    """The daemon broke the protocol: the worker exits."""


class Worker:
    def __init__(self, ch, env):
        self.ch = ch
        self.env = env
        self.code = {}  # module -> (version, code object)
        self.broken = False

    def send(self, msg):
        self.ch.send(msg)

    def make_call(self, exec_id):
        counter = itertools.count(1)
        ch = self.ch

        head = b'{"type":"call","exec":"%s","id":' % exec_id.encode("ascii")
        pack = rpc.HEADER.pack
        max_frame = rpc.MAX_FRAME

        def call(method, params, tail=None):
            """Call system.<method>; tail, when given, is the end of the
            call frame already encoded: ,"method":"…","params":…}."""
            cid = next(counter)
            if tail is not None:
                body = b"%b%d%b" % (head, cid, tail)
                if len(body) > max_frame:
                    raise rpc.ProtocolError("frame of %d bytes exceeds the maximum" % len(body))
                frame = pack(len(body)) + body
            else:
                try:
                    frame = rpc.encode({"type": "call", "exec": exec_id, "id": cid, "method": method,
                                        "params": params}, default=_arg_default)
                except (TypeError, ValueError) as e:
                    raise TypeError("system.%s: the arguments are not JSON values: %s" % (method, e)) from None
            try:
                msg = ch.exchange(frame)
            except rpc.BadJSON as e:
                # Frames are length-delimited: the stream is intact, the
                # daemon's answer to this call was not JSON.
                raise CallError("system.%s: the daemon's answer was not valid JSON: %s" % (method, e)) from None
            except rpc.BadFrame as e:
                raise CallError("system.%s: the daemon's answer was not valid: %s" % (method, e)) from None
            if type(msg) is tuple:
                # A binary result (qubiq_rpc): (exec, id, value), values exact.
                if msg[0] != exec_id or msg[1] != cid:
                    self.broken = True
                    raise Fatal("expected the result of call %d, got a binary result of %r" % (cid, msg[1]))
                return msg[2]
            if msg.get("type") != "result" or msg.get("exec") != exec_id or msg.get("id") != cid:
                self.broken = True
                raise Fatal("expected the result of call %d, got %s" % (cid, msg["type"]))
            if msg["ok"]:
                v = msg.get("value")
                if tail is None and (type(v) is list or type(v) is dict):
                    return _untag(v)
                return v
            err = msg.get("error") or {}
            if err.get("kind") == "permission_denied":
                raise PermissionDenied(err.get("message", "permission denied"))
            raise CallError("system.%s: %s" % (method, err.get("message", "failed")))

        return call

    def make_print(self, exec_id):
        def _print(*args, sep=" ", end="\n", file=None, flush=False):
            if file is not None:
                raise TypeError("print(file=...) is not available in scripts")
            msg = (sep if sep is not None else " ").join(str(a) for a in args)
            self.send({"type": "log", "exec": exec_id, "level": "info", "msg": msg})
        return _print

    def compile(self, module, version, source):
        filename = "<script %s>" % module
        tree, diags = guard.parse(source, filename)
        if tree is not None:
            diags += guard.check_tree(tree, source, check_imports=False)
        errors = [d for d in diags if d["severity"] == "error"]
        if errors:
            d = errors[0]
            return None, {"kind": "invalid", "type": d["code"], "message": d["message"],
                          "line": d["line"], "traceback": ""}
        code = compile(guard.transform(tree), filename, "exec", dont_inherit=True)
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        self.code[module] = (version, code)
        return code, None

    def handle_exec(self, msg):
        exec_id = msg["exec"]
        module = msg["module"]
        done = {"type": "done", "exec": exec_id, "ok": False}
        cached = self.code.get(module)
        if msg.get("cached"):
            if cached is None or cached[0] != msg["version"]:
                raise Fatal("exec asks for cached code of %s v%d that this worker does not hold"
                            % (module, msg["version"]))
            code = cached[1]
        else:
            code, err = self.compile(module, msg["version"], msg.get("source", ""))
            if err:
                done["error"] = err
                self.send(done)
                return
        call = self.make_call(exec_id)
        run = guard.Run(self.env, _System(call), gateway)
        run.builtins["print"] = self.make_print(exec_id)
        g = run.new_globals(module)
        audit = self.env.audit
        filename = code.co_filename
        frame = None
        failure = None
        audit.active = True
        try:
            try:
                exec(code, g)
                fn = g.get(msg["entry"])
                if not callable(fn):
                    done["error"] = {"kind": "invalid", "type": "LookupError",
                                     "message": "module %r has no entry %r" % (module, msg["entry"]),
                                     "line": 0, "traceback": ""}
                elif msg.get("batch"):
                    self.run_batch(exec_id, module, msg, fn, filename)
                    done["ok"] = True
                else:
                    done["value"] = fn(msg.get("args"))
                    done["ok"] = True
                    try:
                        frame = rpc.encode(done, default=_json_default)
                    except (TypeError, ValueError) as e:
                        del done["value"]
                        done["ok"] = False
                        done["error"] = {"kind": "script_error", "type": "TypeError",
                                         "message": "the result of %s.%s is not JSON: %s"
                                         % (module, msg["entry"], e), "line": 0, "traceback": ""}
            except BaseException as e:  # noqa: B036 - the script's failure is reported, the worker lives on
                done.pop("value", None)
                done["ok"] = False
                failure = e
                try:
                    message = str(e)
                except BaseException:  # noqa: B036 - a broken __str__ must not kill the worker
                    message = "<unprintable %s>" % type(e).__name__
        finally:
            audit.active = False
        if self.broken:
            raise Fatal("protocol broken during the run")
        if failure is not None:
            done["error"] = self.describe(failure, message, filename)
            failure = None
        self.send_frame(frame if frame is not None else rpc.encode(done))

    def send_frame(self, frame):
        self.ch.send_frame(frame)

    def run_batch(self, exec_id, module, msg, fn, filename):
        """Call fn once per element of the exec's args (a list), in order,
        and send an item frame for each as soon as it returned or raised
        (the daemon times each element on its own and kills the worker when
        one runs past its timeout)."""
        items = msg.get("args")
        if not isinstance(items, list):
            raise TypeError("a batch run of %s needs a list of args" % module)
        for i, item in enumerate(items):
            out = {"type": "item", "exec": exec_id, "index": i, "ok": True}
            frame = None
            try:
                out["value"] = fn(item)
                try:
                    frame = rpc.encode(out, default=_json_default)
                except (TypeError, ValueError) as e:
                    del out["value"]
                    out["ok"] = False
                    out["error"] = {"kind": "bad_result", "type": "TypeError",
                                    "message": "%s.%s returned a value that is not JSON: %s"
                                    % (module, msg["entry"], e), "line": 0, "traceback": ""}
            except BaseException as e:  # noqa: B036 - the element's failure is reported, the batch goes on
                out.pop("value", None)
                out["ok"] = False
                try:
                    message = str(e)
                except BaseException:  # noqa: B036 - a broken __str__ must not kill the worker
                    message = "<unprintable %s>" % type(e).__name__
                audit = self.env.audit
                audit.active = False  # describe reads the traceback's frames, which scripts may not
                try:
                    out["error"] = self.describe(e, message, filename)
                finally:
                    audit.active = True
                del e
            if self.broken:
                return  # handle_exec ends the worker
            self.send_frame(frame if frame is not None else rpc.encode(out))

    @staticmethod
    def describe(e, message, filename):
        line = 0
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        if isinstance(e, PermissionDenied):
            kind = "permission_denied"
        elif isinstance(e, MemoryError):
            kind = "memory"
        else:
            kind = "script_error"
        if isinstance(e, SyntaxError) and e.filename == filename:
            line = e.lineno or line
        try:
            text = "".join(traceback.format_list(traceback.extract_tb(e.__traceback__, limit=-20)))
        except Exception:  # noqa: BLE001 - never let formatting kill the worker
            text = ""
        lines = [ln for ln in text.splitlines(True) if "qubiq_" not in ln]
        lines.append("%s: %s\n" % (type(e).__name__, message))
        return {"kind": kind, "type": type(e).__name__, "message": message, "line": line,
                "traceback": "".join(lines)[-8192:]}


def main():
    ch = rpc.Channel(4, 3)
    hello = ch.recv()
    if hello["type"] != "hello":
        raise Fatal("first frame is %s, not hello" % hello["type"])
    packages = hello["packages"]
    if packages and os.path.isdir(packages) and packages not in sys.path:
        sys.path.append(packages)
    read_dirs = [p for p in sys.path if p] + [sys.argv[1], packages] + list(hello["read_paths"] or [])
    env = guard.Env(hello["allowed"] or [], hello["installed"] or [], packages, read_dirs)
    env.install_audit_hook()
    ch.send({"type": "ready", "pid": os.getpid(), "python": sys.version.split()[0],
             "executable": sys.executable})
    w = Worker(ch, env)
    while True:
        try:
            msg = ch.recv()
        except EOFError:
            return 0
        if msg["type"] != "exec":
            raise Fatal("unexpected %s frame" % msg["type"])
        w.handle_exec(msg)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (Fatal, rpc.ProtocolError) as e:
        sys.stderr.write("qubiq worker: protocol violation: %s\n" % e)
        sys.stderr.flush()
        os._exit(3)
