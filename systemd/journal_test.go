package systemd

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

type sent struct {
	msg  string
	prio journal.Priority
	vars map[string]string
}

func recorder(out *[]sent, fail error) func(string, journal.Priority, map[string]string) error {
	return func(msg string, p journal.Priority, vars map[string]string) error {
		if fail != nil {
			return fail
		}
		*out = append(*out, sent{msg, p, vars})
		return nil
	}
}

func TestJournalHandler_PrioritiesAndFields(t *testing.T) {
	var got []sent
	lv := new(slog.LevelVar)
	h := NewJournalHandler(LogOptions{Level: lv, AddSource: true, send: recorder(&got, nil)}, nil)
	log := slog.New(h).With("subsystem", "tagengine")
	log.Debug("hidden at info")
	log.Info("scan done", "device", "plc1", slog.Group("http", "status", 200), "err", errors.New("boom"),
		"at", time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), "9lives", 1, "_trusted", "x")
	log.Warn("unit demoted")
	log.Error("write failed")
	log.Log(context.Background(), slog.LevelInfo+2, "notice")
	log.Log(context.Background(), slog.LevelError+4, "crit")
	lv.Set(slog.LevelDebug) // changed at run time: the next record passes
	log.Debug("now shown")

	wantPrio := []journal.Priority{journal.PriInfo, journal.PriWarning, journal.PriErr, journal.PriNotice, journal.PriCrit, journal.PriDebug}
	if len(got) != len(wantPrio) {
		t.Fatalf("%d records sent, want %d: %+v", len(got), len(wantPrio), got)
	}
	for i, p := range wantPrio {
		if got[i].prio != p {
			t.Errorf("record %d (%q): priority %d, want %d", i, got[i].msg, got[i].prio, p)
		}
	}
	v := got[0].vars
	for k, want := range map[string]string{
		"SUBSYSTEM": "tagengine", "DEVICE": "plc1", "HTTP_STATUS": "200", "ERR": "boom",
		"AT": "2025-01-02T03:04:05Z", "F_9LIVES": "1", "TRUSTED": "x",
		"SYSLOG_IDENTIFIER": "qubiqd", "SLOG_LEVEL": "INFO",
	} {
		if v[k] != want {
			t.Errorf("field %s = %q, want %q (all: %v)", k, v[k], want, v)
		}
	}
	if !strings.HasSuffix(v["CODE_FILE"], "journal_test.go") || v["CODE_LINE"] == "" {
		t.Errorf("source fields: %q %q", v["CODE_FILE"], v["CODE_LINE"])
	}
	if got[0].msg != "scan done" {
		t.Errorf("message %q", got[0].msg)
	}
}

func TestJournalHandler_RefusedRecordGoesToStderr(t *testing.T) {
	var buf bytes.Buffer
	h := NewJournalHandler(LogOptions{Stderr: &buf, send: recorder(nil, errors.New("no journal"))}, nil)
	slog.New(h).Info("kept", "device", "plc1")
	slog.New(h).Info("kept too")
	if h.Failures() != 2 {
		t.Fatalf("failures %d", h.Failures())
	}
	out := buf.String()
	if !strings.Contains(out, "journal refused a record") || strings.Count(out, "journal refused") != 1 ||
		!strings.Contains(out, "msg=kept device=plc1") || !strings.Contains(out, "msg=\"kept too\"") {
		t.Fatalf("stderr:\n%s", out)
	}
}

func TestNewLogHandler_OutputsAndLevelVar(t *testing.T) {
	var buf bytes.Buffer
	t.Setenv("JOURNAL_STREAM", "")
	log, lv, err := NewLogger(slog.LevelWarn, LogOptions{Stderr: &buf})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("dropped")
	lv.Set(slog.LevelInfo)
	log.Info("shown")
	if s := buf.String(); strings.Contains(s, "dropped") || !strings.Contains(s, "msg=shown") {
		t.Fatalf("auto off systemd should be text on stderr with the level var: %q", s)
	}
	if _, err := NewLogHandler(LogOptions{Output: "syslog"}); err == nil || !strings.Contains(err.Error(), `"syslog"`) {
		t.Fatalf("unknown output: %v", err)
	}
	if h, _ := NewLogHandler(LogOptions{Output: OutputJournal}); h == nil {
		t.Fatal("journal output: nil handler")
	} else if _, ok := h.(*JournalHandler); !ok {
		t.Fatalf("journal output: %T", h)
	}
	if l, err := ParseLevel("WARN"); err != nil || l != slog.LevelWarn {
		t.Fatalf("ParseLevel: %v %v", l, err)
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Fatal("ParseLevel accepted loud")
	}
}

func TestFieldName(t *testing.T) {
	for in, want := range map[string]string{"device": "DEVICE", "http.status": "HTTP_STATUS", "__x": "X", "": "FIELD",
		"1a": "F_1A", "tag-path": "TAG_PATH", strings.Repeat("a", 70): strings.Repeat("A", 64)} {
		if got := FieldName(in); got != want {
			t.Errorf("FieldName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestJournalHandler_NativeProtocolOverRealSocket sends through
// go-systemd's journal.Send to /run/systemd/journal/socket in a private
// mount namespace (a child process with its own /run), and parses what the
// journal would receive.
func TestJournalHandler_NativeProtocolOverRealSocket(t *testing.T) {
	if os.Getenv("QUBIQ_JOURNAL_CHILD") == "1" {
		journalChild()
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for a private mount namespace (this machine's tests run as root)")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJournalHandler_NativeProtocolOverRealSocket$", "-test.v")
	cmd.Env = append(os.Environ(), "QUBIQ_JOURNAL_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var fields map[string]string
	for _, l := range strings.Split(string(out), "\n") {
		if j, ok := strings.CutPrefix(l, "FIELDS "); ok {
			if err := json.Unmarshal([]byte(j), &fields); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, want := range map[string]string{"MESSAGE": "multi\nline", "PRIORITY": "4", "DEVICE": "plc1", "SYSLOG_IDENTIFIER": "qubiqd"} {
		if fields[k] != want {
			t.Errorf("%s = %q, want %q (child output:\n%s)", k, fields[k], want, out)
		}
	}
}

func journalChild() {
	fail := func(err error) { println("CHILD ERROR", err.Error()); os.Exit(1) }
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		fail(err)
	}
	if err := syscall.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		fail(err)
	}
	if err := os.MkdirAll("/run/systemd/journal", 0o755); err != nil {
		fail(err)
	}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: "/run/systemd/journal/socket", Net: "unixgram"})
	if err != nil {
		fail(err)
	}
	if !journal.Enabled() {
		fail(errors.New("journal.Enabled false with the socket there"))
	}
	h, _ := NewLogHandler(LogOptions{Output: OutputJournal})
	slog.New(h).Warn("multi\nline", "device", "plc1")
	buf := make([]byte, 65536)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		fail(err)
	}
	fields := parseNative(buf[:n])
	j, _ := json.Marshal(fields)
	println("FIELDS " + string(j))
}

// parseNative decodes the journal's native protocol
// (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/): NAME=value lines, or NAME
// newline, 64-bit little-endian length, value, newline.
func parseNative(b []byte) map[string]string {
	out := map[string]string{}
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			break
		}
		line := b[:nl]
		if eq := bytes.IndexByte(line, '='); eq >= 0 {
			out[string(line[:eq])] = string(line[eq+1:])
			b = b[nl+1:]
			continue
		}
		name := string(line)
		b = b[nl+1:]
		n := binary.LittleEndian.Uint64(b[:8])
		out[name] = string(b[8 : 8+n])
		b = b[8+n+1:]
	}
	return out
}
