"""Where the worker's share of one system.tag.read goes (bench-sandbox,
bench/README.md "The script call floor"): the steps the worker runs for a
one-tag read, each timed alone in this process, with no pipe and no daemon:
formatting the call frame, decoding the answer's JSON, checking it, and
building the QualifiedValue. Prints one line
`bench-sandbox-detail: py_frame_us=... py_decode_us=... py_check_us=...
py_values_us=... py_total_us=...` (the best of 5 repeats of 100,000 calls
each, in microseconds per call).

Run with the worker's interpreter: python3 -I -S pycost.py SANDBOX_PYTHON_DIR
"""
import sys
import timeit

sys.path.insert(0, sys.argv[1])
import qubiq_rpc as rpc  # noqa: E402
import qubiq_worker as w  # noqa: E402

N = 100000
ANSWER = (b'{"type":"result","exec":"0123456789abcdef","id":12345,"ok":true,'
          b'"value":{"v":[1500.25],"q":"Good","t":"2026-12-01T23:50:01.123456789Z"}}')
PATHS = ["Line1/Motor0/Speed"]
RAW = rpc.dumps({"paths": PATHS})
EXEC = "0123456789abcdef"
EXEC_B = EXEC.encode("ascii")
MSG = rpc.Channel._decode(ANSWER, False)


def frame():
    return rpc.frame(b'{"type":"call","exec":"%s","id":%d,"method":"%s","params":%s}'
                     % (EXEC_B, 12345, "tag.read".encode("ascii"), RAW))


def decode():
    return rpc.Channel._decode(ANSWER, False)


def check():
    msg = MSG
    if msg.get("type") != "result" or msg.get("exec") != EXEC or msg.get("id") != 12345:
        raise AssertionError
    if msg["ok"]:
        return msg.get("value")


def values():
    return w._from_columns(PATHS, MSG["value"])


def best(f):
    return min(timeit.repeat(f, number=N, repeat=5)) / N * 1e6


costs = {"py_frame_us": best(frame), "py_decode_us": best(decode), "py_check_us": best(check),
         "py_values_us": best(values)}
costs["py_total_us"] = sum(costs.values())
print("bench-sandbox-detail: " + " ".join("%s=%.2f" % kv for kv in costs.items()))
