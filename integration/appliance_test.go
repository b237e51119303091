//go:build integration

package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// notifySocket is the NOTIFY_SOCKET a test makes for qubiqd: every
// datagram it receives, in order.
type notifySocket struct {
	t    *testing.T
	path string
	ch   chan string
	mu   sync.Mutex
	seen []string
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "qn-") // short: a socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &notifySocket{t: t, path: filepath.Join(dir, "notify"), ch: make(chan string, 4096)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				close(n.ch)
				return
			}
			n.ch <- string(buf[:k])
		}
	}()
	return n
}

// next waits up to 60 s for a datagram matching pred and returns it with
// every datagram received before it (since the last call).
func (n *notifySocket) next(what string, pred func(string) bool) (string, []string) {
	n.t.Helper()
	var before []string
	deadline := time.After(60 * time.Second)
	for {
		select {
		case d, ok := <-n.ch:
			if !ok {
				n.t.Fatalf("notify socket closed waiting for %s; got %q", what, before)
			}
			n.mu.Lock()
			n.seen = append(n.seen, d)
			n.mu.Unlock()
			if pred(d) {
				return d, before
			}
			before = append(before, d)
		case <-deadline:
			n.t.Fatalf("no %s over NOTIFY_SOCKET within 60s; got %q", what, before)
		}
	}
}

func has(state string) func(string) bool {
	return func(d string) bool {
		for _, l := range strings.Split(d, "\n") {
			if l == state || (strings.HasSuffix(state, "*") && strings.HasPrefix(l, strings.TrimSuffix(state, "*"))) {
				return true
			}
		}
		return false
	}
}

// fakeModbus is a Modbus TCP server (Modbus Messaging on TCP/IP
// Implementation Guide V1.0b, §3.1: the MBAP header) answering function 3
// and 4 with counting registers, that can be wedged: requests are then
// read and not answered until unwedged (the pending one is answered then).
type fakeModbus struct {
	ln   net.Listener
	gate atomic.Pointer[chan struct{}]
	n    atomic.Uint32
}

func newFakeModbus(t *testing.T) *fakeModbus {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeModbus{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeModbus) wedge() {
	g := make(chan struct{})
	f.gate.Store(&g)
}

func (f *fakeModbus) unwedge() {
	if g := f.gate.Swap(nil); g != nil {
		close(*g)
	}
}

func (f *fakeModbus) serve(c net.Conn) {
	defer c.Close()
	for {
		var hdr [7]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		pdu := make([]byte, int(binary.BigEndian.Uint16(hdr[4:6]))-1)
		if _, err := io.ReadFull(c, pdu); err != nil {
			return
		}
		if g := f.gate.Load(); g != nil {
			<-*g
		}
		var resp []byte
		switch fc := pdu[0]; fc {
		case 3, 4:
			qty := int(binary.BigEndian.Uint16(pdu[3:5]))
			resp = []byte{fc, byte(2 * qty)}
			for i := 0; i < qty; i++ {
				resp = binary.BigEndian.AppendUint16(resp, uint16(f.n.Add(1)))
			}
		default:
			resp = []byte{pdu[0] | 0x80, 1}
		}
		out := append(hdr[:4:4], 0, 0, hdr[6])
		binary.BigEndian.PutUint16(out[4:6], uint16(len(resp)+1))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// TestAppliance_NotifyWatchdogWedgedScan runs qubiqd under a NOTIFY_SOCKET
// the test makes, with WATCHDOG_USEC=2s: READY=1 comes with a STATUS=
// summary, WATCHDOG=1 pings follow; a Modbus device that stops answering
// (its timeout is an hour: the scan loop is wedged in a read) makes the
// daemon withhold the pings (STATUS= names the scan loops) for as long as
// it lasts, and pings resume when the loop does; SIGTERM sends STOPPING=1.
func TestAppliance_NotifyWatchdogWedgedScan(t *testing.T) {
	mb := newFakeModbus(t)
	n := newNotifySocket(t)
	project := fmt.Sprintf(`devices:
  - {name: plc, driver: modbus, url: "tcp://%s", unit_id: 1, timeout: 1h}
tags:
  - {path: Line/Count, device: plc, address: HR0, type: uint16, scan: 100ms}
`, mb.ln.Addr())
	d := newDaemon(t, project, "NOTIFY_SOCKET="+n.path, "WATCHDOG_USEC=2000000")
	d.start()

	ready, _ := n.next("READY=1", has("READY=1"))
	if !has("STATUS=ok: 1 tags, 1 devices, API on *")(ready) {
		t.Errorf("READY=1 without the STATUS= summary: %q", ready)
	}
	n.next("a first WATCHDOG=1", has("WATCHDOG=1"))
	n.next("a second WATCHDOG=1", has("WATCHDOG=1"))

	mb.wedge()
	withheld, _ := n.next("the pings withheld", has("STATUS=watchdog withheld: *"))
	if !strings.Contains(withheld, "scan loops: no progress") {
		t.Errorf("withheld for another reason: %q", withheld)
	}
	time.Sleep(5 * time.Second) // five ticks of the watchdog, all withheld
	mb.unwedge()
	_, between := n.next("the pings resumed", has("STATUS=running"))
	for _, dg := range between {
		if has("WATCHDOG=1")(dg) {
			t.Fatalf("WATCHDOG=1 sent while the scan loop was wedged: %q", between)
		}
	}
	n.next("WATCHDOG=1 after the loop resumed", has("WATCHDOG=1"))
	if !strings.Contains(d.logs(), "watchdog ping withheld") {
		t.Errorf("the withheld pings are not logged:\n%s", d.logs())
	}
	d.stop()
	n.next("STOPPING=1", has("STOPPING=1"))
}

// TestAppliance_LogLevelAtRunTime: qubiqctl log-level changes the running
// daemon's level (debug records appear only after it), audited.
func TestAppliance_LogLevelAtRunTime(t *testing.T) {
	d := newDaemon(t, "tags: []\n")
	d.start()
	if out := d.qubiqctl(d.token, "log-level"); !strings.Contains(out, "log level: info") {
		t.Fatalf("log-level: %q", out)
	}
	d.call("GET", "/api/v1/health", "", nil, nil)
	if strings.Contains(d.logs(), "level=DEBUG") {
		t.Fatalf("debug records at level info:\n%s", d.logs())
	}
	if out := d.qubiqctl(d.token, "log-level", "debug"); !strings.Contains(out, "log level: debug") {
		t.Fatalf("log-level debug: %q", out)
	}
	d.call("GET", "/api/v1/health", "", nil, nil)
	d.waitLog(`level=DEBUG msg=request subsystem=api route="GET /api/v1/health"`)
	if st, body := d.call("PUT", "/api/v1/log-level", d.token, map[string]any{"level": "loud"}, nil); st != 400 {
		t.Fatalf("a bad level: %d %s", st, body)
	}
	d.waitAudit(d.token, `"action":"log.level"`, `"after":{"after":"DEBUG","before":"INFO"}`)
}

// TestAppliance_BackupWhileWritingRestore takes a backup with qubiqctl
// while history is recorded and vars are written, restores it into fresh
// appliances through qubiqctl restore (the daemon stages it, exits 75, and
// restores it at its next start), and checks the restored store with
// bbolt's consistency check, the project, and that history and vars are
// the source's as of one moment: every tag's points a prefix of the
// source's, the vars written one after the other a prefix too. Without
// --keep-credentials the old appliance's tokens do not work there.
func TestAppliance_BackupWhileWritingRestore(t *testing.T) {
	project := `devices:
  - {name: sim, driver: sim}
tags:
  - {path: Line/Ramp, device: sim, address: "ramp(0,1000,3s)", type: float64, scan: 20ms, history: {enabled: true}}
  - {path: Line/Noise, device: sim, address: "random(0,100)", type: float64, scan: 20ms, history: {enabled: true}}
`
	a := newDaemon(t, project)
	a.start()
	start := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
	time.Sleep(500 * time.Millisecond) // some history first

	stopWrites := make(chan struct{})
	var written atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stopWrites:
				return
			default:
			}
			if st, body := a.call("PUT", fmt.Sprintf("/api/v1/vars/w%d", i), a.token, map[string]any{"value": i}, nil); st >= 300 {
				t.Errorf("PUT var w%d: %d %s", i, st, body)
				return
			}
			written.Store(int64(i + 1))
		}
	}()
	for written.Load() < 20 {
		time.Sleep(10 * time.Millisecond)
	}
	file := filepath.Join(t.TempDir(), "line1.qbk")
	out := a.qubiqctl(a.token, "backup", "-o", file)
	if !strings.Contains(out, "backup written to "+file) {
		t.Fatalf("backup: %q", out)
	}
	time.Sleep(200 * time.Millisecond) // writes go on after the snapshot
	close(stopWrites)
	wg.Wait()

	// A fresh appliance, keeping the old credentials.
	b := freshDaemon(t)
	b.start()
	out = b.qubiqctl(b.token, "restore", file, "--keep-credentials")
	if !strings.Contains(out, "checked and staged") {
		t.Fatalf("restore: %q", out)
	}
	b.awaitExit(75)
	// From its next start the restored appliance records history of its
	// own (it runs the restored project): the backup's points are those
	// before it.
	restarted := time.Now()
	b.start()
	b.stop()
	checkBolt(t, filepath.Join(b.dir, "data", "qubiq.db"))
	b.start()
	// The same project.
	_, pa := a.call("GET", "/api/v1/project/export", a.token, nil, nil)
	st, pb := b.call("GET", "/api/v1/project/export", a.token, nil, nil)
	if st != 200 || !bytes.Equal(pa, pb) {
		t.Fatalf("project after restore (%d):\n%s\nsource:\n%s", st, pb, pa)
	}
	// History: the restored points are the source's up to one moment.
	for _, path := range []string{"Line/Ramp", "Line/Noise"} {
		var hb []histPoint
		for _, p := range history(t, b, a.token, path, start) {
			if p.Timestamp.Before(restarted) {
				hb = append(hb, p)
			}
		}
		ha := history(t, a, a.token, path, start)
		if len(hb) < 10 {
			t.Fatalf("%s: %d points restored", path, len(hb))
		}
		last := hb[len(hb)-1].Timestamp
		var prefix []histPoint
		for _, p := range ha {
			if !p.Timestamp.After(last) {
				prefix = append(prefix, p)
			}
		}
		if len(prefix) != len(hb) {
			t.Fatalf("%s: %d points restored, the source had %d up to %s", path, len(hb), len(prefix), last)
		}
		for i := range hb {
			if hb[i] != prefix[i] {
				t.Fatalf("%s: point %d restored as %+v, the source has %+v", path, i, hb[i], prefix[i])
			}
		}
		if len(ha) <= len(hb) {
			t.Errorf("%s: the source recorded nothing after the backup (%d points, %d restored)", path, len(ha), len(hb))
		}
	}
	// Vars: written one after the other, restored as a prefix.
	m := 0
	for ; m < int(written.Load()); m++ {
		if st, _ := b.call("GET", fmt.Sprintf("/api/v1/vars/w%d", m), a.token, nil, nil); st != 200 {
			break
		}
	}
	for i := m; i < int(written.Load()); i++ {
		if st, _ := b.call("GET", fmt.Sprintf("/api/v1/vars/w%d", i), a.token, nil, nil); st == 200 {
			t.Fatalf("var w%d restored but not w%d: not one moment's snapshot", i, m)
		}
	}
	if m < 20 || m == int(written.Load()) {
		t.Fatalf("%d of %d vars restored", m, written.Load())
	}
	// Each appliance keeps its own secrets key.
	ka, _ := os.ReadFile(filepath.Join(a.dir, "data", "secrets.key"))
	kb, _ := os.ReadFile(filepath.Join(b.dir, "data", "secrets.key"))
	if len(ka) > 0 && bytes.Equal(ka, kb) {
		t.Errorf("the restored appliance has the source's secrets.key")
	}
	a.waitAudit(a.token, `"action":"appliance.backup"`)

	// Another fresh appliance, without the old credentials, from a backup
	// whose secrets key is sealed with a passphrase.
	pass := filepath.Join(t.TempDir(), "pass")
	os.WriteFile(pass, []byte("correct horse\n"), 0o600)
	sealed := filepath.Join(t.TempDir(), "sealed.qbk")
	a.qubiqctl(a.token, "backup", "-o", sealed, "--passphrase-file", pass)
	c := freshDaemon(t)
	c.start()
	fresh := c.token
	cmd := exec.Command(filepath.Join(bins(t), "qubiqctl"), "--url", c.url, "--api-key", fresh, "restore", sealed)
	if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("passphrase")) {
		t.Fatalf("a sealed backup restored without its passphrase: %v %s", err, out)
	}
	c.qubiqctl(c.token, "restore", sealed, "--passphrase-file", pass)
	c.awaitExit(75)
	c.start()
	if st, _ := c.call("GET", "/api/v1/vars/w0", a.token, nil, nil); st != 401 {
		t.Fatalf("the old appliance's token on a restore without --keep-credentials: %d", st)
	}
	// The fresh appliance's bootstrap token belonged to the store set
	// aside; the restored one has no user to provision from either, so
	// the daemon made a new one.
	if st, _ := c.call("GET", "/api/v1/vars/w0", fresh, nil, nil); st != 401 {
		t.Fatalf("the fresh appliance's bootstrap token after the restore: %d", st)
	}
	if tok, err := os.ReadFile(filepath.Join(c.dir, "data", "bootstrap-token")); err == nil && strings.TrimSpace(string(tok)) == fresh {
		t.Fatalf("the bootstrap token file still holds the fresh appliance's token")
	}
}

// freshDaemon is a daemon without a project file: all it holds comes
// from the restore.
func freshDaemon(t *testing.T) *daemon {
	d := newDaemon(t, "")
	cfg, err := os.ReadFile(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.cfg, bytes.Replace(cfg, []byte("project: project.yaml\n"), nil, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// awaitExit waits for the daemon to exit by itself with status code.
func (d *daemon) awaitExit(code int) {
	d.t.Helper()
	select {
	case err := <-d.exitErr:
		d.cmd = nil
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != code {
			d.t.Fatalf("qubiqd exited with %v, want status %d\n%s", err, code, d.logs())
		}
	case <-time.After(60 * time.Second):
		d.t.Fatalf("qubiqd did not exit within 60s\n%s", d.logs())
	}
}

type histPoint struct {
	Timestamp time.Time
	Value     string
	Quality   string
}

func history(t *testing.T, d *daemon, token, path, start string) []histPoint {
	t.Helper()
	var series []struct {
		Points []struct {
			Timestamp string          `json:"timestamp"`
			Value     json.RawMessage `json:"value"`
			Quality   string          `json:"quality"`
		} `json:"points"`
	}
	st, body := d.call("GET", "/api/v1/history?path="+path+"&start="+start, token, nil, &series)
	if st != 200 || len(series) != 1 {
		t.Fatalf("history %s: %d %s", path, st, body)
	}
	var out []histPoint
	for _, p := range series[0].Points {
		ts, err := time.Parse(time.RFC3339Nano, p.Timestamp)
		if err != nil {
			t.Fatalf("history %s: timestamp %q: %v", path, p.Timestamp, err)
		}
		out = append(out, histPoint{ts, string(p.Value), p.Quality})
	}
	return out
}

// checkBolt runs bbolt's consistency check (bbolt check's tx.Check) on a
// store file.
func checkBolt(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var errs []error
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Fatalf("bbolt check %s: %v", path, err)
	}
}

// waitLog waits (up to 30 s) for the daemon's log to hold s: a request's
// record is written after its answer.
func (d *daemon) waitLog(s string) {
	d.t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(d.logs(), s) {
			return
		}
	}
	d.t.Fatalf("the log never held %q:\n%s", s, d.logs())
}

// waitAudit waits (up to 30 s) for the audit log to hold every one of
// want: records are committed in batches after the action.
func (d *daemon) waitAudit(token string, want ...string) {
	d.t.Helper()
	var body []byte
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		_, body = d.call("GET", "/api/v1/audit?limit=1000", token, nil, nil)
		all := true
		for _, w := range want {
			all = all && bytes.Contains(body, []byte(w))
		}
		if all {
			return
		}
	}
	d.t.Fatalf("the audit log never held %q: %s", want, body)
}

// TestAppliance_NewerSchemaRefused: a qubiqd that finds a store written by
// a newer schema refuses to start, and the message says what to do.
func TestAppliance_NewerSchemaRefused(t *testing.T) {
	d := newDaemon(t, "tags: []\n")
	d.start()
	d.stop()
	path := filepath.Join(d.dir, "data", "qubiq.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("schema_version"), binary.BigEndian.AppendUint64(nil, 99))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bins(t), "qubiqd"), "--config", d.cfg)
	cmd.Env = append(os.Environ(), d.env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("qubiqd on a newer schema: %v\n%s", err, out)
	}
	for _, want := range []string{"store schema version 99 is newer than this firmware knows", "flash firmware that knows schema 99 again",
		"restore a backup made on this version into a fresh data directory"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
}

// TestAppliance_ReadyBeforeTheWorkers: READY=1 does not wait for the
// sandbox's Python workers (docs/appliance.md, Readiness); a run sent the
// moment READY=1 arrives, of a module the project's file brings (saved
// after the workers start), waits for them and succeeds, and STATUS= is
// sent again once they are up.
func TestAppliance_ReadyBeforeTheWorkers(t *testing.T) {
	n := newNotifySocket(t)
	d := newDaemon(t, "devices:\n  - {name: sim, driver: sim}\ntags:\n  - {path: Line/A, device: sim, address: memory, type: float64}\n"+
		"scripts:\n  - {module: m, file: scripts/m.py}\n", "NOTIFY_SOCKET="+n.path)
	if err := os.MkdirAll(filepath.Join(d.dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, "scripts", "m.py"), []byte("def ok(args):\n    return 41 + args\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.spawn()
	n.next("READY=1", has("READY=1"))
	tok, err := os.ReadFile(filepath.Join(d.dir, "data", "bootstrap-token"))
	if err != nil {
		t.Fatalf("no bootstrap token at READY=1: %v", err)
	}
	d.token = strings.TrimSpace(string(tok))
	var run struct {
		Result int `json:"result"`
	}
	if st, body := d.call("POST", "/api/v1/scripts/m/ok/run", d.token, map[string]any{"args": 1}, &run); st != 200 || run.Result != 42 {
		t.Fatalf("a run at READY=1: %d %s, want 42", st, body)
	}
	n.next("STATUS= once the workers are up", has("STATUS=ok: 1 tags, 1 devices, API on *"))
	d.awaitHealth()
}
