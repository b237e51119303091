//go:build integration

package modbus

// Integration against a real third-party Modbus implementation: pymodbus
// 3.0.0 (Debian python3-pymodbus), started by internal/peers on a free
// loopback port, in Modbus TCP and in RTU-over-TCP (ModbusRtuFramer on a
// TCP server). A wire log in front of it records the function codes and
// addresses each test sends. A unit that stops answering is tested with the
// in-process fake (read_test.go, rtu_test.go): pymodbus cannot silence one
// unit of several on demand.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	gbmodbus "github.com/goburrow/modbus"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/device/devicetest"
	"qubiq.dev/edge/internal/peers"
	"qubiq.dev/edge/value"
)

// wireLog is a TCP proxy that records each request frame (Modbus TCP or
// RTU) passing from the driver to the server.
type wireLog struct {
	ln  net.Listener
	rtu bool

	mu   sync.Mutex
	reqs []string // "u1 fc3 100+11"
}

func newWireLog(t *testing.T, target string, rtu bool) *wireLog {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireLog{ln: ln, rtu: rtu}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(c, s); c.Close() }()
			go func() { w.pump(c, s); s.Close() }()
		}
	}()
	return w
}

// pump copies requests from c to s, recording each.
func (w *wireLog) pump(c, s net.Conn) {
	for {
		var frame []byte
		if w.rtu {
			var hdr [6]byte
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				return
			}
			frame = hdr[:]
			switch hdr[1] {
			case 15, 16:
				var bc [1]byte
				if _, err := io.ReadFull(c, bc[:]); err != nil {
					return
				}
				rest := make([]byte, int(bc[0])+2)
				if _, err := io.ReadFull(c, rest); err != nil {
					return
				}
				frame = append(append(frame, bc[0]), rest...)
			default:
				var crc [2]byte
				if _, err := io.ReadFull(c, crc[:]); err != nil {
					return
				}
				frame = append(frame, crc[:]...)
			}
			w.note(frame[0], frame[1], frame[2:])
		} else {
			var hdr [7]byte
			if _, err := io.ReadFull(c, hdr[:]); err != nil {
				return
			}
			rest := make([]byte, int(binary.BigEndian.Uint16(hdr[4:]))-1)
			if _, err := io.ReadFull(c, rest); err != nil {
				return
			}
			frame = append(hdr[:], rest...)
			w.note(hdr[6], rest[0], rest[1:])
		}
		if _, err := s.Write(frame); err != nil {
			return
		}
	}
}

func (w *wireLog) note(unit, fc byte, data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs = append(w.reqs, fmt.Sprintf("u%d fc%d %d+%d", unit, fc, binary.BigEndian.Uint16(data), binary.BigEndian.Uint16(data[2:])))
}

// take returns the requests recorded since the last take.
func (w *wireLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.reqs
	w.reqs = nil
	return out
}

func (w *wireLog) url() string {
	if w.rtu {
		return "rtu+tcp://" + w.ln.Addr().String()
	}
	return "tcp://" + w.ln.Addr().String()
}

func newPeerDriver(t *testing.T, url string, mutate func(*Config)) *Driver {
	t.Helper()
	c := DefaultConfig
	c.URL = url
	c.Timeout = device.Duration(time.Second)
	if mutate != nil {
		mutate(&c)
	}
	d := newClosedTestDriver(t, c)
	if err := d.Open(context.Background()); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return d
}

// TestIntegration_Pymodbus_EveryFunction reads FC1-FC4 and writes
// FC5/FC6 (write_mode single) and FC15/FC16 (multiple) against pymodbus,
// in Modbus TCP and RTU over TCP, and reads each write back with a client
// that is not ours. A point with unit_id 2 reaches the second unit.
func TestIntegration_Pymodbus_EveryFunction(t *testing.T) {
	for _, rtu := range []bool{false, true} {
		name := map[bool]string{false: "tcp", true: "rtu+tcp"}[rtu]
		t.Run(name, func(t *testing.T) {
			m := peers.StartModbusWith(t, peers.ModbusOptions{RTU: rtu}, map[int]peers.ModbusUnit{
				1: {HR: map[int]uint16{0: 0x41E0, 1: 0xC190, 2: 0xFFEC, 10: 0x9BD4, 11: 0x436E},
					IR: map[int]uint16{10: 0x9BD4, 11: 0x436E},
					CO: map[int]uint16{0: 1, 2: 1},
					DI: map[int]uint16{5: 1}},
				2: {HR: map[int]uint16{0: 2}},
			})
			w := newWireLog(t, fmt.Sprintf("127.0.0.1:%d", m.Port), rtu)
			u2 := pt("HR0", value.Uint16, "")
			u2.UnitID = 2
			points := []device.Point{pt("HR0", value.Float32, ""), pt("40003", value.Int16, ""), pt("IR10", value.Float32, "CDAB"),
				pt("CO0", value.Bool, ""), pt("00002", value.Bool, ""), pt("CO2", value.Bool, ""), pt("DI5", value.Bool, ""),
				pt("HR2.2", value.Bool, ""), u2}
			want := []value.Value{28.094513, int64(-20), 238.6087, true, false, true, true, true, uint64(2)}
			d := newPeerDriver(t, w.url(), func(c *Config) { c.WriteMode = WriteSingle })
			for i, v := range d.Read(context.Background(), points) {
				wantGood(t, points[i].Address, v, want[i])
			}
			if got, want := fmt.Sprint(w.take()), "[u1 fc1 0+3 u1 fc2 5+1 u1 fc3 0+3 u1 fc4 10+2 u2 fc3 0+1]"; got != want {
				t.Errorf("reads on the wire %s, want %s", got, want)
			}
			writes := []struct {
				p    device.Point
				v    value.Value
				mode string
				fc   string
			}{
				{pt("HR20", value.Int16, ""), -300, WriteSingle, "u1 fc6 20+65236"},
				{pt("CO7", value.Bool, ""), true, WriteSingle, "u1 fc5 7+65280"},
				{pt("HR21", value.Float32, "CDAB"), 28.094513, WriteMultiple, "u1 fc16 21+2"},
				{pt("CO8", value.Bool, ""), true, WriteMultiple, "u1 fc15 8+1"},
			}
			for _, wr := range writes {
				d := newPeerDriver(t, w.url(), func(c *Config) { c.WriteMode = wr.mode })
				if err := devicetest.Write(context.Background(), d, wr.p, wr.v); err != nil {
					t.Errorf("write %s (%s): %v", wr.p.Address, wr.mode, err)
				}
				if got := fmt.Sprint(w.take()); got != "["+wr.fc+"]" {
					t.Errorf("write %s on the wire %s, want [%s]", wr.p.Address, got, wr.fc)
				}
			}
			// Read back with pymodbus's own client (HR) and goburrow's (coils, over Modbus TCP).
			if regs := readBackHR(t, m, rtu, 20, 3); fmt.Sprint(regs) != fmt.Sprint([]uint16{0xFED4, 0xC190, 0x41E0}) {
				t.Errorf("HR20..22 read back %04X, want [FED4 C190 41E0]", regs)
			}
			if !rtu {
				h := gbmodbus.NewTCPClientHandler(fmt.Sprintf("127.0.0.1:%d", m.Port))
				h.SlaveId, h.Timeout = 1, time.Second
				defer h.Close()
				bits, err := gbmodbus.NewClient(h).ReadCoils(7, 2)
				if err != nil || len(bits) != 1 || bits[0] != 0x03 {
					t.Errorf("coils 7..8 read back %v, %v; want both set", bits, err)
				}
			}
		})
	}
}

// readBackHR reads holding registers with a client that is not the
// driver: pymodbus's own for Modbus TCP, goburrow's RTU packager over a
// plain socket for RTU over TCP.
func readBackHR(t *testing.T, m *peers.Modbus, rtu bool, addr, n int) []uint16 {
	t.Helper()
	if !rtu {
		return m.ReadHR(1, addr, n)
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", m.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pk := gbmodbus.NewRTUClientHandler("")
	pk.SlaveId = 1
	req, _ := pk.Encode(&gbmodbus.ProtocolDataUnit{FunctionCode: 3, Data: []byte{0, byte(addr), 0, byte(n)}})
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	resp := make([]byte, 5+2*n)
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatalf("read back: %v", err)
	}
	var out []uint16
	for i := range n {
		out = append(out, binary.BigEndian.Uint16(resp[3+2*i:]))
	}
	return out
}

// TestIntegration_Pymodbus_ExceptionForUnmappedAddress: pymodbus answers
// exception 2 for addresses it lacks; the point is Bad_ConfigurationError
// with function 0x03 named (not 0x83), the connection stays, and a write to
// a missing register is refused the same way.
func TestIntegration_Pymodbus_ExceptionForUnmappedAddress(t *testing.T) {
	for _, rtu := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "rtu+tcp"}[rtu], func(t *testing.T) {
			m := peers.StartModbusWith(t, peers.ModbusOptions{RTU: rtu, Sparse: true},
				map[int]peers.ModbusUnit{1: {HR: map[int]uint16{0: 1}, IR: map[int]uint16{0: 2}}})
			d := newPeerDriver(t, fmt.Sprintf("%s://127.0.0.1:%d", map[bool]string{false: "tcp", true: "rtu+tcp"}[rtu], m.Port), nil)
			tests := []struct {
				p      device.Point
				reason string
			}{
				{pt("HR500", value.Int16, ""), "illegal data address (exception 2), function 0x03"},
				{pt("IR500", value.Int16, ""), "illegal data address (exception 2), function 0x04"},
				{pt("CO500", value.Bool, ""), "illegal data address (exception 2), function 0x01"},
				{pt("DI500", value.Bool, ""), "illegal data address (exception 2), function 0x02"},
			}
			for _, tt := range tests {
				v := read1(t, d, tt.p)
				wantQuality(t, tt.p.Address, v, value.BadConfigurationError)
				if v.Reason != tt.reason {
					t.Errorf("%s reason %q, want %q", tt.p.Address, v.Reason, tt.reason)
				}
			}
			wantGood(t, "HR0 after the exceptions", read1(t, d, pt("HR0", value.Int16, "")), int64(1))
			err := devicetest.Write(context.Background(), d, pt("HR500", value.Int16, ""), 5)
			if err == nil || qualityErr(t, err).Quality != value.BadConfigurationError {
				t.Errorf("write to a missing register = %v, want Bad_ConfigurationError", err)
			}
		})
	}
}

// TestIntegration_Pymodbus_BlockWithHole: registers 100..103 and 105..110
// exist, 104 does not; the planner bridges the hole, pymodbus refuses the
// merged read, the driver halves it and remembers: every tag is Good, and
// the next scan sends the two parts, each merged over its own gaps.
func TestIntegration_Pymodbus_BlockWithHole(t *testing.T) {
	for _, rtu := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "rtu+tcp"}[rtu], func(t *testing.T) {
			hr := map[int]uint16{}
			for a := 100; a <= 110; a++ {
				if a != 104 {
					hr[a] = uint16(a)
				}
			}
			m := peers.StartModbusWith(t, peers.ModbusOptions{RTU: rtu, Sparse: true}, map[int]peers.ModbusUnit{1: {HR: hr}})
			w := newWireLog(t, fmt.Sprintf("127.0.0.1:%d", m.Port), rtu)
			d := newPeerDriver(t, w.url(), nil)
			points := []device.Point{pt("HR100", value.Uint16, ""), pt("HR102", value.Uint32, ""), pt("HR105", value.Uint16, ""), pt("HR110", value.Uint16, "")}
			want := []value.Value{uint64(100), uint64(102<<16 | 103), uint64(105), uint64(110)}
			for round, wire := range []string{"[u1 fc3 100+11 u1 fc3 100+4 u1 fc3 105+6]", "[u1 fc3 100+4 u1 fc3 105+6]"} {
				for i, v := range d.Read(context.Background(), points) {
					wantGood(t, fmt.Sprintf("round %d %s", round+1, points[i].Address), v, want[i])
				}
				if got := fmt.Sprint(w.take()); got != wire {
					t.Errorf("round %d on the wire %s, want %s", round+1, got, wire)
				}
			}
		})
	}
}

// TestIntegration_Pymodbus_RestartedMidScan: a scan loop runs while
// pymodbus is killed and started again on the same port. During the outage
// the points are bad (not connected), no scan hangs past the timeout, and
// after the restart the scan is Good again within a few periods.
func TestIntegration_Pymodbus_RestartedMidScan(t *testing.T) {
	m := peers.StartModbus(t, map[int]peers.ModbusUnit{1: {HR: map[int]uint16{0: 42}}})
	d := newPeerDriver(t, fmt.Sprintf("tcp://127.0.0.1:%d", m.Port), func(c *Config) {
		c.Timeout = device.Duration(200 * time.Millisecond)
	})
	p := []device.Point{pt("HR0", value.Uint16, "")}
	type scanResult struct {
		at  time.Time
		q   value.Quality
		dur time.Duration
	}
	var (
		mu      sync.Mutex
		results []scanResult
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			start := time.Now()
			v := d.Read(ctx, p)[0]
			mu.Lock()
			results = append(results, scanResult{start, v.Quality, time.Since(start)})
			mu.Unlock()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	stopping := time.Now()
	m.Stop()
	stopped := time.Now()
	time.Sleep(500 * time.Millisecond)
	starting := time.Now()
	m.Start()
	started := time.Now()
	time.Sleep(1500 * time.Millisecond)
	cancel()
	<-done

	var before, during, after, afterGood int
	var firstGoodAfter time.Time
	for _, r := range results {
		if r.dur > 400*time.Millisecond {
			t.Errorf("a scan took %s, want at most the 200ms timeout (and a dial)", r.dur)
		}
		end := r.at.Add(r.dur)
		switch {
		case end.Before(stopping):
			before++
			if r.q != value.Good {
				t.Errorf("scan before the restart: %s", r.q)
			}
		case r.at.Before(stopped) || !end.Before(starting) && r.at.Before(started):
			// in flight while the server was killed or started: either outcome is right
		case end.Before(starting):
			during++
			if r.q == value.Good {
				t.Errorf("scan while the server was down: Good")
			}
		default:
			after++
			if r.q == value.Good {
				afterGood++
				if firstGoodAfter.IsZero() {
					firstGoodAfter = r.at
				}
			}
		}
	}
	if before == 0 || during == 0 || after == 0 {
		t.Fatalf("scans before/during/after the restart: %d/%d/%d, want some of each", before, during, after)
	}
	if firstGoodAfter.IsZero() || firstGoodAfter.Sub(started) > time.Second {
		t.Errorf("first Good scan %s after the restart, want within 1s (backoff is capped)", firstGoodAfter.Sub(started))
	}
	if afterGood < after/2 {
		t.Errorf("%d of %d scans Good after the restart", afterGood, after)
	}
}
