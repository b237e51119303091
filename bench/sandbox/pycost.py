"""Where the worker's share of one system.tag.read goes (bench-sandbox,
bench/README.md "The script call floor"): the steps the worker runs for a
one-tag read, each timed alone in this process, with no pipe and no daemon,
with the worker's audit hook installed and active as while a script runs:
formatting the call frame, decoding the answer (a binary result frame,
sandbox/rpc/pickle.go), checking it, and building the QualifiedValue.
Prints one line `bench-sandbox-detail: py_frame_us=... py_decode_us=...
py_check_us=... py_values_us=... py_total_us=... py_call_us=...
py_json_decode_us=... py_marshal_decode_us=...` (the best of 5 repeats of
100,000 calls each, in microseconds per call). py_call_us is a whole
system.tag.read of the worker (its Python layers included) over a channel
without a pipe: all the worker does per call but its two system calls. The
last two decode the same answer as the JSON frame sent before binary frames
and as marshal, for comparison.

Run with the worker's interpreter: python3 -I -S pycost.py SANDBOX_PYTHON_DIR
"""
import itertools
import marshal
import struct
import sys
import timeit

sys.path.insert(0, sys.argv[1])
import qubiq_guard as guard  # noqa: E402
import qubiq_rpc as rpc  # noqa: E402
import qubiq_worker as w  # noqa: E402

N = 100000
TIME = "2026-12-01T23:50:01.123456789Z"
EXEC = "0123456789abcdef"
# The answer as the daemon writes it (rpc.Pickle): (exec, id, ([v], q, t, None)).
ANSWER = (b"\x80\x04\x8c\x10" + EXEC.encode("ascii") + b"J" + struct.pack("<i", 12345) +
          b"(](G" + struct.pack(">d", 1500.25) + b"e\x8c\x04Good\x8c" + bytes([len(TIME)]) +
          TIME.encode("ascii") + b"Nt\x87.")
JSON_ANSWER = (b'{"type":"result","exec":"0123456789abcdef","id":12345,"ok":true,'
               b'"value":{"v":[1500.25],"q":"Good","t":"2026-12-01T23:50:01.123456789Z"}}')
MARSHAL_ANSWER = marshal.dumps((EXEC, 12345, ([1500.25], "Good", TIME, None)), 4)
PATHS = ["Line1/Motor0/Speed"]
TAIL = w._call_tail("tag.read", rpc.dumps({"paths": PATHS}))
HEAD = b'{"type":"call","exec":"%s","id":' % EXEC.encode("ascii")
MSG = rpc.Channel._decode(ANSWER, False)
assert MSG == (EXEC, 12345, ([1500.25], "Good", TIME, None)), MSG


def frame():
    body = b"%b%d%b" % (HEAD, 12345, TAIL)
    if len(body) > rpc.MAX_FRAME:
        raise AssertionError
    return rpc.HEADER.pack(len(body)) + body


BODY = ANSWER


def decode():
    # Channel.recv's path for a whole binary frame read at once.
    if BODY[:1] == b"\x80":
        return rpc._binary(BODY)


def check():
    msg = MSG
    if type(msg) is tuple:
        if msg[0] != EXEC or msg[1] != 12345:
            raise AssertionError
        return msg[2]


def values():
    return w._from_columns(PATHS, MSG[2])


def json_decode():
    return rpc.Channel._decode(JSON_ANSWER, False)


def marshal_decode():
    return marshal.loads(MARSHAL_ANSWER)


class StubChannel:
    """The worker's Channel without the pipe: the call frame goes nowhere
    and every answer is ANSWER decoded, with the call's id."""

    def __init__(self):
        self.ids = itertools.count(1)

    def exchange(self, frame):
        msg = rpc._binary(ANSWER)
        return (msg[0], next(self.ids), msg[2])


def best(f):
    return min(timeit.repeat(f, number=N, repeat=5)) / N * 1e6


env = guard.Env([], [], "", [sys.argv[1]])
env.install_audit_hook()
env.audit.active = True
costs = {"py_frame_us": best(frame), "py_decode_us": best(decode), "py_check_us": best(check),
         "py_values_us": best(values)}
costs["py_total_us"] = sum(costs.values())
read = w._System(w.Worker(StubChannel(), env).make_call(EXEC)).tag.read
costs["py_call_us"] = best(lambda: read(PATHS))
costs["py_json_decode_us"] = best(json_decode)
costs["py_marshal_decode_us"] = best(marshal_decode)
env.audit.active = False
print("bench-sandbox-detail: " + " ".join("%s=%.2f" % kv for kv in costs.items()))
