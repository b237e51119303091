package sandbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestPool_Check_EntriesAndTimeouts(t *testing.T) {
	cfg := testConfig(t)
	cfg.GatewayTimeout.Default = 10 * time.Second
	cfg.GatewayTimeout.Min = 10 * time.Millisecond
	cfg.GatewayTimeout.Max = 10 * time.Minute
	p := startPool(t, cfg, newFakeServices())
	code := `
import json, math, datetime
import system

@gateway(timeout_ms=2000)
def set_speed(args):
    return 1

@gateway(timeout_ms=1)
def too_short(args):
    pass

@gateway(timeout_ms=99999999999)
def too_long(msg):
    pass

@gateway
def bare(args):
    pass

def plain(args, extra=None):
    _ = 1
    _tmp = 2
    return _ + _tmp

def transform(msg):
    pass

def _private(args):
    pass

def two(a, b):
    pass

def none():
    pass

async def later(args):
    pass

class K:
    def method(self, args):
        pass
`
	info, err := p.Check(context.Background(), "pumps", code)
	if err != nil {
		t.Fatalf("Check: %v %+v", err, info.Diagnostics)
	}
	want := "[{set_speed 2000} {too_short 10} {too_long 600000} {bare 10000} {plain 10000} {transform 10000}]"
	if got := fmt.Sprint(info.Entries); got != want {
		t.Errorf("entries %s, want %s", got, want)
	}
	// Clamping is reported, once per clamped entry, as a warning.
	var warned []string
	for _, d := range info.Diagnostics {
		if d.Code != "QB-timeout" || d.Severity != "warning" {
			t.Errorf("unexpected diagnostic %+v", d)
			continue
		}
		warned = append(warned, d.Message)
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "too_short: @gateway(timeout_ms=1)") || !strings.Contains(warned[0], "10ms applies") ||
		!strings.Contains(warned[1], "too_long") || !strings.Contains(warned[1], "10m0s applies") {
		t.Errorf("clamp warnings %q", warned)
	}
	// Each warning points at the @gateway it is about (lines 9 and 13 of
	// code), not at the top of the module.
	var at []string
	for _, d := range info.Diagnostics {
		at = append(at, fmt.Sprintf("%d:%d-%d:%d", d.Line, d.Column, d.EndLine, d.EndColumn))
	}
	if got, want := strings.Join(at, " "), "9:2-9:23 13:2-13:33"; got != want {
		t.Errorf("clamp warnings at %s, want %s", got, want)
	}
}

// TestPool_Check_ClampWarningAtItsDecorator: the @gateway under another
// decorator, in the second entry of a module, is where its clamp warning
// points.
func TestPool_Check_ClampWarningAtItsDecorator(t *testing.T) {
	cfg := testConfig(t)
	cfg.GatewayTimeout.Min = 10 * time.Millisecond
	p := startPool(t, cfg, newFakeServices())
	code := "def keep(f):\n    return f\n\n@gateway(timeout_ms=2000)\ndef first(args):\n    pass\n\n" +
		"@keep\n@gateway(timeout_ms=1)\ndef second(args):\n    pass\n"
	info, err := p.Check(context.Background(), "m", code)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(info.Diagnostics) != 1 || info.Diagnostics[0].Code != "QB-timeout" || info.Diagnostics[0].Line != 9 ||
		info.Diagnostics[0].Column != 2 || !strings.Contains(info.Diagnostics[0].Message, "second:") {
		t.Errorf("diagnostics %+v, want one QB-timeout for second at line 9, column 2", info.Diagnostics)
	}
}

// TestPool_Check_DecoratorTypo: a decorator one edit from @gateway that
// nothing binds would make every run fail with NameError: saving refuses
// it and names the decorator meant. A decorator the module defines, or a
// name not near a known one, is the script's business.
func TestPool_Check_DecoratorTypo(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	for _, tt := range []struct {
		name, code string
		line, col  int
	}{
		{"bare", "@gatway\ndef f(args):\n    pass\n", 1, 2},
		{"called", "x = 1\n\n@gatewayy(timeout_ms=5)\ndef f(args):\n    pass\n", 3, 2},
		{"inner function", "def f(args):\n    @Gateway\n    def g(x):\n        pass\n    return 1\n", 2, 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			info, err := p.Check(context.Background(), "m", tt.code)
			re := runErrOf(t, err)
			if re.Kind != KindInvalid || !strings.Contains(re.Detail, "did you mean @gateway?") || re.Line != tt.line {
				t.Errorf("error %+v, want invalid naming @gateway at line %d", re, tt.line)
			}
			if len(info.Diagnostics) != 1 || info.Diagnostics[0].Code != "unknown-decorator" || info.Diagnostics[0].Severity != "error" ||
				info.Diagnostics[0].Line != tt.line || info.Diagnostics[0].Column != tt.col {
				t.Errorf("diagnostics %+v, want one unknown-decorator error at %d:%d", info.Diagnostics, tt.line, tt.col)
			}
		})
	}
	for _, code := range []string{
		"def gatewa(f):\n    return f\n\n@gatewa\ndef f(args):\n    pass\n",
		"@property_of_nothing\ndef f(args):\n    pass\n",
		"class K:\n    @property\n    def x(self):\n        return 1\n",
	} {
		if info, err := p.Check(context.Background(), "m", code); err != nil || len(info.Diagnostics) != 0 {
			t.Errorf("Check(%q): %v %+v, want no finding", code, err, info.Diagnostics)
		}
	}
}

func TestPool_Check_Refusals(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	tests := []struct {
		name, code, diagCode, msg string
		line, col                 int
	}{
		{"syntax error", "def f(args):\n    return (1,\n", "syntax-error", "SyntaxError", 2, 12},
		{"module-level return", "return 1\n", "syntax-error", "'return' outside function", 1, 1},
		{"import os", "import os\n", "forbidden-import", "module 'os' is not available in scripts (allowed: datetime, json, math, system; installed packages: none)", 1, 1},
		{"from subprocess", "def f(args):\n    from subprocess import run\n", "forbidden-import", "module 'subprocess' is not available", 2, 5},
		{"relative import", "from . import x\n", "forbidden-import", "relative imports", 1, 1},
		{"star import", "from json import *\n", "forbidden-import", "star imports", 1, 1},
		{"private name import", "from json import _default_encoder\n", "forbidden-import", "'_default_encoder'", 1, 1},
		{"underscore attribute", "def f(args):\n    return args._x\n", "forbidden-attribute", "forbidden attribute '_x'", 2, 17},
		{"dunder attribute", "x = (1).__class__\n", "forbidden-attribute", "forbidden attribute '__class__'", 1, 9},
		{"non-ascii column", "s = 'éé'.__class__\n", "forbidden-attribute", "'__class__'", 1, 10},
		{"frame attribute", "def f(g):\n    return g.f_back\n", "forbidden-attribute", "'f_back'", 2, 14},
		{"code attribute", "def f(g):\n    return g.co_code\n", "forbidden-attribute", "'co_code'", 2, 14},
		{"dunder name", "x = __builtins__\n", "forbidden-name", "'__builtins__'", 1, 5},
		{"dunder import", "os = __import__('os')\n", "forbidden-name", "'__import__'", 1, 6},
		{"dunder def", "class K:\n    def __init__(self):\n        pass\n", "forbidden-name", "'__init__'", 2, 5},
		{"positional-only dunder", "def f(args, /, __qubiq_w__=None):\n    pass\n", "forbidden-name", "'__qubiq_w__'", 1, 16},
		{"lambda dunder", "g = lambda __x: __x\n", "forbidden-name", "'__x'", 1, 12},
		{"keyword dunder", "d = dict(__x=1)\n", "forbidden-name", "'__x'", 1, 10},
		{"except dunder", "try:\n    pass\nexcept Exception as __e:\n    pass\n", "forbidden-name", "'__e'", 3, 1},
		{"gateway not literal", "N = 5\n@gateway(timeout_ms=N)\ndef f(args):\n    pass\n", "gateway-timeout", "integer literal", 2, 21},
		{"gateway positional", "@gateway(5)\ndef f(args):\n    pass\n", "gateway-timeout", "keyword arguments only", 1, 2},
		{"gateway typo", "@gatway\ndef f(args):\n    pass\n", "unknown-decorator", "unknown decorator @gatway: did you mean @gateway?", 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := p.Check(context.Background(), "m", tt.code)
			re := runErrOf(t, err)
			if re.Kind != KindInvalid || re.Line != tt.line {
				t.Errorf("error %+v, want invalid at line %d", re, tt.line)
			}
			if len(info.Diagnostics) == 0 {
				t.Fatalf("no diagnostics")
			}
			d := info.Diagnostics[0]
			if d.Code != tt.diagCode || !strings.Contains(d.Message, tt.msg) || d.Line != tt.line || d.Column != tt.col ||
				d.Severity != "error" || d.EndLine < d.Line {
				t.Errorf("diagnostic %+v, want %s %q at %d:%d", d, tt.diagCode, tt.msg, tt.line, tt.col)
			}
		})
	}
}

func TestPool_Check_PlainUnderscoreNamesAndWarnings(t *testing.T) {
	p := startPool(t, testConfig(t), newFakeServices())
	code := "def f(args):\n    _ = 1\n    _tmp = '\\d'\n    for _i in range(2):\n        pass\n    return _, _tmp\n"
	info, err := p.Check(context.Background(), "m", code)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(info.Diagnostics) != 1 || info.Diagnostics[0].Severity != "warning" || info.Diagnostics[0].Line != 3 {
		t.Errorf("diagnostics %+v, want one warning (invalid escape) on line 3", info.Diagnostics)
	}
	for _, name := range []string{"", "a/b", "_x"} {
		if _, err := p.Check(context.Background(), name, "x = 1\n"); KindOf(err) != KindInvalid {
			t.Errorf("module name %q: %v", name, err)
		}
	}
}
