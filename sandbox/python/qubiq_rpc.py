"""Transport between the QUBIQ Edge daemon and a Python worker.

Mirror of the Go package sandbox/rpc: the same message types with the same
fields (a Go test compares MESSAGES with the Go structs and round-trips every
type through this module). Frames are a 4-byte big-endian length and a UTF-8
JSON object whose first key is "type". A successful result (daemon -> worker
only) may instead be a binary frame: a body in pickle protocol 4 (it begins
with the PROTO opcode 0x80, never '{') holding the tuple (exec, id, value),
written by the daemon's encoder of None, bool, int, float, str, list, tuple
and dict alone (sandbox/rpc/pickle.go). Standard library only.
"""

import json
import os
import struct

# The C unpickler, for binary results: unlike marshal.loads it raises no
# audit event, which the worker's audit hook would pay for on every call.
from _pickle import loads as _ploads

MAX_FRAME = 16 << 20

# type -> ordered list of (field, kind, required). kind is one of
# "str", "int", "bool", "list[str]", "json", "object".
MESSAGES = {
    "hello": [("type", "str", True), ("allowed", "list[str]", True),
              ("packages", "str", True), ("installed", "list[str]", True),
              ("read_paths", "list[str]", True)],
    "ready": [("type", "str", True), ("pid", "int", True), ("python", "str", True),
              ("executable", "str", True)],
    "exec": [("type", "str", True), ("exec", "str", True), ("module", "str", True),
             ("version", "int", True), ("entry", "str", True), ("source", "str", False),
             ("cached", "bool", False), ("batch", "bool", False), ("args", "json", True)],
    "call": [("type", "str", True), ("exec", "str", True), ("id", "int", True),
             ("method", "str", True), ("params", "json", True)],
    "result": [("type", "str", True), ("exec", "str", True), ("id", "int", True),
               ("ok", "bool", True), ("value", "json", False), ("error", "object", False)],
    "log": [("type", "str", True), ("exec", "str", True), ("level", "str", True),
            ("msg", "str", True)],
    "done": [("type", "str", True), ("exec", "str", True), ("ok", "bool", True),
             ("value", "json", False), ("error", "object", False)],
    "item": [("type", "str", True), ("exec", "str", True), ("index", "int", True),
             ("ok", "bool", True), ("value", "json", False), ("error", "object", False)],
}

# Nested objects: "error" of result (CallError), of done and of item
# (ScriptError).
OBJECTS = {
    "result.error": [("kind", "str", True), ("message", "str", True), ("scope", "str", False)],
    "done.error": [("kind", "str", True), ("type", "str", True), ("message", "str", True),
                   ("line", "int", True), ("traceback", "str", True)],
    "item.error": [("kind", "str", True), ("type", "str", True), ("message", "str", True),
                   ("line", "int", True), ("traceback", "str", True)],
}


class ProtocolError(Exception):
    """A frame that does not follow the protocol."""


class BadFrame(ProtocolError):
    """A whole frame whose body cannot be decoded (the stream itself is intact)."""


class BadJSON(BadFrame):
    """A whole frame whose body is not JSON."""


def _check_kind(where, value, kind):
    ok = True
    if kind == "str":
        ok = isinstance(value, str)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "list[str]":
        # Go encodes a nil slice as null.
        ok = value is None or (isinstance(value, list) and all(isinstance(x, str) for x in value))
    elif kind == "object":
        ok = value is None or isinstance(value, dict)
    if not ok:
        raise ProtocolError("%s: want %s, got %s" % (where, kind, type(value).__name__))


def _validate(where, obj, fields):
    if not isinstance(obj, dict):
        raise ProtocolError("%s: not an object" % where)
    names = set()
    for name, kind, required in fields:
        names.add(name)
        if name not in obj:
            if required:
                raise ProtocolError("%s: missing field %r" % (where, name))
            continue
        _check_kind("%s.%s" % (where, name), obj[name], kind)
    extra = set(obj) - names
    if extra:
        raise ProtocolError("%s: unknown fields %s" % (where, sorted(extra)))


def validate(msg):
    """Raise ProtocolError unless msg is a well-formed message of a known type."""
    if not isinstance(msg, dict):
        raise ProtocolError("frame is not an object")
    t = msg.get("type")
    fields = MESSAGES.get(t)
    if fields is None:
        raise ProtocolError("unknown message type %r" % (t,))
    _validate(t, msg, fields)
    err = msg.get("error")
    if err is not None and (t + ".error") in OBJECTS:
        _validate(t + ".error", err, OBJECTS[t + ".error"])
    return msg


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_ENCODERS = {None: _ENCODER}
_HEADER = struct.Struct(">I")
HEADER = _HEADER  # the frame header (a 4-byte big-endian length)


def encode(msg, default=None):
    """Encode msg (a dict whose first key is "type") as one frame. default
    converts values json cannot encode (as json.dumps's default); TypeError
    or ValueError when msg is not JSON."""
    enc = _ENCODERS.get(default)
    if enc is None:
        enc = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=default)
        _ENCODERS[default] = enc
    body = enc.encode(msg).encode("utf-8")
    if len(body) > MAX_FRAME:
        raise ProtocolError("frame of %d bytes exceeds the maximum" % len(body))
    return _HEADER.pack(len(body)) + body


def dumps(obj):
    """obj as compact UTF-8 JSON bytes (the encoding of frames)."""
    return _ENCODER.encode(obj).encode("utf-8")


def frame(body):
    """One frame of an already encoded body (bytes)."""
    if len(body) > MAX_FRAME:
        raise ProtocolError("frame of %d bytes exceeds the maximum" % len(body))
    return _HEADER.pack(len(body)) + body


def _binary(body):
    """The tuple (exec, id, value) of a binary result frame's body."""
    try:
        msg = _ploads(body)
    except Exception as e:  # noqa: BLE001 - any failure of the body is a bad frame
        raise BadFrame("bad binary frame: %s: %s" % (type(e).__name__, e)) from None
    if type(msg) is tuple and len(msg) == 3:
        return msg
    raise ProtocolError("a binary frame is not (exec, id, value)")


class Channel:
    """Frames in from one fd, frames out to another."""

    def __init__(self, rfd, wfd):
        self._r = rfd
        self._w = wfd
        self._buf = bytearray()

    def _read_exact(self, n):
        buf = self._buf
        while len(buf) < n:
            chunk = os.read(self._r, max(65536, n - len(buf)))
            if not chunk:
                raise EOFError("daemon closed the channel")
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    def recv(self, check=True):
        """The next message. check=False skips the field-by-field validation
        (the caller checks the few fields it reads) and accepts a binary
        result frame too, returned as the tuple (exec, id, value)."""
        if not self._buf:
            # The common case: one read returns exactly one whole frame.
            chunk = os.read(self._r, 65536)
            if not chunk:
                raise EOFError("daemon closed the channel")
            if len(chunk) >= 4 and _HEADER.unpack_from(chunk)[0] == len(chunk) - 4:
                if not check and chunk[4:5] == b"\x80":
                    return _binary(chunk[4:])
                return self._decode(chunk[4:], check)
            self._buf += chunk
        (n,) = _HEADER.unpack(self._read_exact(4))
        if n > MAX_FRAME:
            raise ProtocolError("frame of %d bytes exceeds the maximum" % n)
        return self._decode(self._read_exact(n), check)

    @staticmethod
    def _decode(body, check):
        if len(body) > MAX_FRAME:
            raise ProtocolError("frame of %d bytes exceeds the maximum" % len(body))
        if body[:1] == b"\x80":
            if check:
                raise ProtocolError("a binary frame where a message was expected")
            return _binary(body)
        try:
            msg = json.loads(body.decode("utf-8"))
        except ValueError as e:
            raise BadJSON("bad frame: %s" % e)
        if not check:
            if not isinstance(msg, dict):
                raise ProtocolError("frame is not an object")
            return msg
        return validate(msg)

    def exchange(self, frame):
        """send_frame(frame), then recv(check=False): a system.* call's
        round trip in one method (the worker's hot path)."""
        n = os.write(self._w, frame)
        if n != len(frame):
            self.send_frame(frame[n:])
        if not self._buf:
            chunk = os.read(self._r, 65536)
            if len(chunk) >= 4 and _HEADER.unpack_from(chunk)[0] == len(chunk) - 4:
                if chunk[4:5] != b"\x80":
                    return self._decode(chunk[4:], False)
                try:
                    msg = _ploads(chunk[4:])
                except Exception as e:  # noqa: BLE001 - any failure of the body is a bad frame
                    raise BadFrame("bad binary frame: %s: %s" % (type(e).__name__, e)) from None
                if type(msg) is tuple and len(msg) == 3:
                    return msg
                raise ProtocolError("a binary frame is not (exec, id, value)")
            if not chunk:
                raise EOFError("daemon closed the channel")
            self._buf += chunk
        return self.recv(check=False)

    def send(self, msg):
        self.send_frame(encode(msg))

    def send_frame(self, frame):
        n = os.write(self._w, frame)
        if n == len(frame):
            return
        data = memoryview(frame)[n:]
        while data:
            n = os.write(self._w, data)
            data = data[n:]


def _echo(rfd, wfd):
    """Self-test: decode every frame, validate it, send it back re-encoded."""
    ch = Channel(rfd, wfd)
    while True:
        try:
            msg = ch.recv()
        except EOFError:
            return
        ch.send(msg)


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["--schema"]:
        print(json.dumps({"messages": MESSAGES, "objects": OBJECTS}))
    elif sys.argv[1:] == ["--echo"]:
        _echo(0, 1)
