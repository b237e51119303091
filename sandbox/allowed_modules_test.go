package sandbox

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"
)

// allowedModulesScript calls every public callable of math, json and
// datetime once, and every public method of their classes, from a gateway
// script (the standard library's lazy imports included: datetime.strptime
// imports _strptime, strftime and timetuple import time). Entries whose
// documented behaviour is to raise (tzinfo's abstract methods,
// JSONEncoder.default) say which exception. The script also lists the
// public callables its table lacks, so a newer Python's additions fail the
// test instead of going untested.
const allowedModulesScript = `
def run(args):
    import math, json, datetime
    d = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.timezone.utc)
    day = datetime.date(2024, 5, 6)
    tm = datetime.time(7, 8, 9, tzinfo=datetime.timezone.utc)
    td = datetime.timedelta(hours=2)
    tz = datetime.timezone(datetime.timedelta(hours=1), "CET")
    base = datetime.tzinfo()

    class Sink:
        parts = []
        def write(self, s):
            self.parts = self.parts + [s]

    class Source:
        def read(self):
            return '{"a": [1, 2.5, "x"]}'

    calls = {
        "math": {
            "acos": lambda: math.acos(0.5), "acosh": lambda: math.acosh(2), "asin": lambda: math.asin(0.5),
            "asinh": lambda: math.asinh(1), "atan": lambda: math.atan(1), "atan2": lambda: math.atan2(1, 2),
            "atanh": lambda: math.atanh(0.5), "cbrt": lambda: math.cbrt(27), "ceil": lambda: math.ceil(1.2),
            "comb": lambda: math.comb(5, 2), "copysign": lambda: math.copysign(1, -2), "cos": lambda: math.cos(1),
            "cosh": lambda: math.cosh(1), "degrees": lambda: math.degrees(1), "dist": lambda: math.dist((0, 0), (3, 4)),
            "erf": lambda: math.erf(1), "erfc": lambda: math.erfc(1), "exp": lambda: math.exp(1),
            "exp2": lambda: math.exp2(3), "expm1": lambda: math.expm1(1), "fabs": lambda: math.fabs(-1),
            "factorial": lambda: math.factorial(5), "floor": lambda: math.floor(1.7), "fma": lambda: math.fma(2, 3, 4),
            "fmod": lambda: math.fmod(7, 3), "frexp": lambda: math.frexp(8), "fsum": lambda: math.fsum([0.1] * 10),
            "gamma": lambda: math.gamma(5), "gcd": lambda: math.gcd(12, 18), "hypot": lambda: math.hypot(3, 4),
            "isclose": lambda: math.isclose(1, 1.0000000001), "isfinite": lambda: math.isfinite(1),
            "isinf": lambda: math.isinf(1), "isnan": lambda: math.isnan(1), "isqrt": lambda: math.isqrt(17),
            "lcm": lambda: math.lcm(4, 6), "ldexp": lambda: math.ldexp(1, 3), "lgamma": lambda: math.lgamma(5),
            "log": lambda: math.log(8, 2), "log10": lambda: math.log10(100), "log1p": lambda: math.log1p(1),
            "log2": lambda: math.log2(8), "modf": lambda: math.modf(1.5), "nextafter": lambda: math.nextafter(1, 2),
            "perm": lambda: math.perm(5, 2), "pow": lambda: math.pow(2, 10), "prod": lambda: math.prod([1, 2, 3]),
            "radians": lambda: math.radians(180), "remainder": lambda: math.remainder(7, 3), "sin": lambda: math.sin(1),
            "sinh": lambda: math.sinh(1), "sqrt": lambda: math.sqrt(2), "sumprod": lambda: math.sumprod([1, 2], [3, 4]),
            "tan": lambda: math.tan(1), "tanh": lambda: math.tanh(1), "trunc": lambda: math.trunc(1.7),
            "ulp": lambda: math.ulp(1),
        },
        "json": {
            "dumps": lambda: json.dumps({"a": [1, 2.5, None, True]}, indent=2, sort_keys=True),
            "loads": lambda: json.loads('{"a": [1, 2.5, null, true]}'),
            "dump": lambda: json.dump({"a": 1}, Sink()),
            "load": lambda: json.load(Source()),
            "detect_encoding": lambda: json.detect_encoding(b'{"a": 1}'),
            "JSONDecoder": lambda: json.JSONDecoder(),
            "JSONEncoder": lambda: json.JSONEncoder(),
            "JSONDecodeError": lambda: json.JSONDecodeError("bad", "{", 0),
        },
        "json.JSONDecoder": {
            "decode": lambda: json.JSONDecoder().decode('[1, "x"]'),
            "raw_decode": lambda: json.JSONDecoder().raw_decode('[1] tail'),
        },
        "json.JSONEncoder": {
            "encode": lambda: json.JSONEncoder().encode({"a": 1}),
            "iterencode": lambda: list(json.JSONEncoder().iterencode({"a": [1, 2]})),
            "default": (TypeError, lambda: json.JSONEncoder().default(object())),
        },
        "json.JSONDecodeError": {
            "add_note": lambda: json.JSONDecodeError("bad", "{", 0).add_note("n"),
            "with_traceback": lambda: json.JSONDecodeError("bad", "{", 0).with_traceback(None),
        },
        "datetime": {
            "date": lambda: datetime.date(2024, 1, 2), "datetime": lambda: datetime.datetime(2024, 1, 2, 3),
            "time": lambda: datetime.time(1, 2), "timedelta": lambda: datetime.timedelta(days=1),
            "timezone": lambda: datetime.timezone(datetime.timedelta(hours=-5)), "tzinfo": lambda: datetime.tzinfo(),
        },
        "datetime.date": {
            "ctime": lambda: day.ctime(), "fromisocalendar": lambda: datetime.date.fromisocalendar(2024, 1, 1),
            "fromisoformat": lambda: datetime.date.fromisoformat("2024-05-06"),
            "fromordinal": lambda: datetime.date.fromordinal(700000), "fromtimestamp": lambda: datetime.date.fromtimestamp(0),
            "isocalendar": lambda: day.isocalendar(), "isoformat": lambda: day.isoformat(),
            "isoweekday": lambda: day.isoweekday(), "replace": lambda: day.replace(day=1),
            "strftime": lambda: day.strftime("%Y-%m-%d %A %j"), "timetuple": lambda: day.timetuple(),
            "today": lambda: datetime.date.today(), "toordinal": lambda: day.toordinal(), "weekday": lambda: day.weekday(),
            "strptime": lambda: datetime.date.strptime("2024-05-06", "%Y-%m-%d"),
        },
        "datetime.datetime": {
            "astimezone": lambda: d.astimezone(tz), "combine": lambda: datetime.datetime.combine(day, tm),
            "ctime": lambda: d.ctime(), "date": lambda: d.date(), "dst": lambda: d.dst(),
            "fromisocalendar": lambda: datetime.datetime.fromisocalendar(2024, 1, 1),
            "fromisoformat": lambda: datetime.datetime.fromisoformat("2024-05-06T07:08:09+00:00"),
            "fromordinal": lambda: datetime.datetime.fromordinal(700000),
            "fromtimestamp": lambda: datetime.datetime.fromtimestamp(0, datetime.timezone.utc),
            "isocalendar": lambda: d.isocalendar(), "isoformat": lambda: d.isoformat(),
            "isoweekday": lambda: d.isoweekday(), "now": lambda: datetime.datetime.now(datetime.timezone.utc),
            "replace": lambda: d.replace(year=2020), "strftime": lambda: d.strftime("%Y-%m-%dT%H:%M:%S%z %a"),
            "strptime": lambda: datetime.datetime.strptime("2024-05-06 07:08", "%Y-%m-%d %H:%M"),
            "time": lambda: d.time(), "timestamp": lambda: d.timestamp(), "timetuple": lambda: d.timetuple(),
            "timetz": lambda: d.timetz(), "today": lambda: datetime.datetime.today(), "toordinal": lambda: d.toordinal(),
            "tzname": lambda: d.tzname(), "utcfromtimestamp": lambda: datetime.datetime.utcfromtimestamp(0),
            "utcnow": lambda: datetime.datetime.utcnow(), "utcoffset": lambda: d.utcoffset(),
            "utctimetuple": lambda: d.utctimetuple(), "weekday": lambda: d.weekday(),
        },
        "datetime.time": {
            "dst": lambda: tm.dst(), "fromisoformat": lambda: datetime.time.fromisoformat("07:08:09"),
            "isoformat": lambda: tm.isoformat(), "replace": lambda: tm.replace(hour=1),
            "strftime": lambda: tm.strftime("%H:%M:%S"), "tzname": lambda: tm.tzname(), "utcoffset": lambda: tm.utcoffset(),
            "strptime": lambda: datetime.time.strptime("07:08", "%H:%M"),
        },
        "datetime.timedelta": {"total_seconds": lambda: td.total_seconds()},
        "datetime.timezone": {
            "dst": lambda: tz.dst(None), "fromutc": lambda: tz.fromutc(d.replace(tzinfo=tz)),
            "tzname": lambda: tz.tzname(None), "utcoffset": lambda: tz.utcoffset(None),
        },
        "datetime.tzinfo": {
            "dst": (NotImplementedError, lambda: base.dst(None)),
            "fromutc": (ValueError, lambda: base.fromutc(d)),
            "tzname": (NotImplementedError, lambda: base.tzname(None)),
            "utcoffset": (NotImplementedError, lambda: base.utcoffset(None)),
        },
    }
    objects = {"math": math, "json": json, "datetime": datetime,
               "json.JSONDecoder": json.JSONDecoder, "json.JSONEncoder": json.JSONEncoder,
               "json.JSONDecodeError": json.JSONDecodeError,
               "datetime.date": datetime.date, "datetime.datetime": datetime.datetime, "datetime.time": datetime.time,
               "datetime.timedelta": datetime.timedelta, "datetime.timezone": datetime.timezone,
               "datetime.tzinfo": datetime.tzinfo}
    missing, failed, called = [], {}, []
    for where, obj in objects.items():
        for name in dir(obj):
            if name.startswith("_"):
                continue
            v = getattr(obj, name)
            if callable(v) and not isinstance(v, (datetime.date, datetime.time, datetime.timedelta, datetime.tzinfo)) \
                    and name not in calls[where]:
                missing.append(where + "." + name)
    for where, table in calls.items():
        for name, entry in table.items():
            if not hasattr(objects[where], name):
                continue  # not in this Python version
            expect, fn = (entry if isinstance(entry, tuple) else (None, entry))
            try:
                fn()
                if expect:
                    failed[where + "." + name] = "did not raise " + repr(expect)
            except Exception as e:
                if expect is None or not isinstance(e, expect):
                    failed[where + "." + name] = repr(e)
            called.append(where + "." + name)
    return {"missing": missing, "failed": failed, "called": len(called)}
`

// The allowed modules work as documented: every public callable of math,
// json and datetime (and of their classes) works in a script, those whose
// standard library code imports a private or non-allowed module lazily at
// call time included; the allow-list checks the script's own imports only.
func TestPool_Run_AllowedModulesWork(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	load(t, p, "every", allowedModulesScript)
	var res struct {
		Missing []string          `json:"missing"`
		Failed  map[string]string `json:"failed"`
		Called  int               `json:"called"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, p, full, "every", "run", "null")), &res); err != nil {
		t.Fatal(err)
	}
	sort.Strings(res.Missing)
	if len(res.Missing) > 0 {
		t.Errorf("public callables the test does not call (add them): %s", strings.Join(res.Missing, ", "))
	}
	var failed []string
	for k, v := range res.Failed {
		failed = append(failed, k+": "+v)
	}
	sort.Strings(failed)
	if len(failed) > 0 {
		t.Errorf("%d of %d callables failed:\n%s", len(failed), res.Called, strings.Join(failed, "\n"))
	}
	if res.Called < 120 {
		t.Errorf("only %d callables called", res.Called)
	}
	// The script's own imports are still checked: what the standard library
	// imported for itself is not thereby open to scripts.
	for _, body := range []string{"import _strptime", "import time", "from time import sleep"} {
		p.SetModule("m", "def f(args):\n    "+body+"\n", ModuleInfo{Entries: []Entry{{Name: "f"}}}, 2)
		if _, err := run(t, p, full, "m", "f", "null"); err == nil || !strings.Contains(err.Error(), "not available in scripts") {
			t.Errorf("%q after the lazy imports: %v", body, err)
		}
	}
}
