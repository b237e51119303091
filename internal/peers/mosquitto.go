package peers

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// MosquittoBin is Debian's broker (package mosquitto).
const MosquittoBin = "/usr/sbin/mosquitto"

// Mosquitto is a broker of its own on 127.0.0.1:Port with its own config
// and persistence directory (never the system's broker on 1883). Stop and
// Start restart it on the same port; its persistence (sessions, queued
// QoS 1 messages, retained messages) survives a restart.
type Mosquitto struct {
	Port int
	URL  string // tcp://127.0.0.1:Port
	t    testing.TB
	conf string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
}

// StartMosquitto writes a config (anonymous clients allowed, persistence
// in a temporary directory, no queue limits, so a test's subscriber that
// was away loses nothing) and starts the broker; it is stopped at the end
// of the test. It fails t when mosquitto is missing (scripts/ensure-deps.sh
// installs it) or does not listen within 10 s.
func StartMosquitto(t testing.TB) *Mosquitto { t.Helper(); return startMosquitto(t, true) }

// StartMosquittoEphemeral is StartMosquitto without persistence: a restart
// forgets every session and subscription (https://github.com/eclipse-paho/paho.mqtt.golang/issues/238).
func StartMosquittoEphemeral(t testing.TB) *Mosquitto { t.Helper(); return startMosquitto(t, false) }

func startMosquitto(t testing.TB, persist bool) *Mosquitto {
	t.Helper()
	if _, err := os.Stat(MosquittoBin); err != nil {
		t.Fatalf("the MQTT peer needs Debian's mosquitto at %s (scripts/ensure-deps.sh installs it): %v", MosquittoBin, err)
	}
	dir := t.TempDir()
	m := &Mosquitto{t: t, Port: FreePort(t), conf: filepath.Join(dir, "mosquitto.conf")}
	m.URL = fmt.Sprintf("tcp://127.0.0.1:%d", m.Port)
	me := "root"
	if u, err := user.Current(); err == nil {
		me = u.Username
	}
	// user: a broker started as root would otherwise drop to the
	// mosquitto user, which cannot write the test's directory (no log, no
	// persistence).
	conf := fmt.Sprintf(`listener %d 127.0.0.1
user %s
allow_anonymous true
persistence %v
persistence_location %s/
autosave_interval 1
max_queued_messages 0
max_queued_bytes 0
max_inflight_messages 0
persistent_client_expiration 1h
log_dest file %s/mosquitto.log
log_type error
log_type warning
log_type notice
log_type information
connection_messages true
`, m.Port, me, persist, dir, dir)
	if err := os.WriteFile(m.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(func() {
		m.Stop()
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "mosquitto.log"))
			t.Logf("mosquitto log:\n%s", log)
		}
	})
	return m
}

// Start runs the broker (again) and waits until it accepts connections.
func (m *Mosquitto) Start() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return
	}
	cmd := exec.Command(MosquittoBin, "-c", m.conf)
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("start mosquitto: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(filepath.Dir(m.conf), "mosquitto.log"))
			m.t.Fatalf("mosquitto exited at start: %v\n%s", err, log)
		default:
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port), 200*time.Millisecond); err == nil {
			c.Close()
			m.cmd, m.exited = cmd, exited
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	m.t.Fatalf("mosquitto did not listen on %d within 10 s", m.Port)
}

// Stop ends the broker (SIGTERM: it saves its persistence) and waits until
// the port is closed.
func (m *Mosquitto) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
	m.cmd = nil
}
