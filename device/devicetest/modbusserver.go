package devicetest

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// ModbusServer is an in-process Modbus server for driver tests (docs/architecture.md
// §10): it serves holding and input registers, coils and discrete inputs
// that a test sets, answers exception 2 for any address not set, and lets a
// hook misbehave per request (delay, exceptions, raw hostile frames, an
// answer cut in two with a pause, silence, closing the connection).
// NewModbusServer listens for Modbus TCP (MBAP framing) on 127.0.0.1,
// NewModbusRTUServer for RTU frames over TCP (a serial-to-Ethernet
// gateway), and ServeRTU serves RTU frames on any stream (one end of a
// pseudo-terminal pair, see PTYPair) as a serial slave would. Requests are
// served one at a time per connection, in order. All methods are safe for
// concurrent use.
type ModbusServer struct {
	t    testing.TB
	addr string
	rtu  bool // the listener speaks RTU framing

	mu       sync.Mutex
	ln       net.Listener
	conns    map[io.Closer]struct{}
	holding  map[uint16]uint16
	input    map[uint16]uint16
	coils    map[uint16]bool
	discrete map[uint16]bool
	hook     func(Request) *Reply
	reqs     []Request
	wg       sync.WaitGroup
}

// Request is one request the server received.
type Request struct {
	N        int    // 1 for the first request the server received, then 2, ...
	TxID     uint16 // MBAP transaction id (0 on RTU)
	Unit     byte   // unit id (RTU: slave address)
	Function byte
	Data     []byte    // PDU data after the function code (RTU: without the CRC)
	Raw      []byte    // the whole ADU as received
	At       time.Time // when the whole request had arrived
}

// Address returns the first 16-bit field of the PDU data (the start address
// of every standard read and write).
func (r Request) Address() uint16 { return r.word(0) }

// Quantity returns the second 16-bit field of the PDU data (the quantity of a
// read or multiple write, the value of a single write).
func (r Request) Quantity() uint16 { return r.word(2) }

func (r Request) word(i int) uint16 {
	if len(r.Data) < i+2 {
		return 0
	}
	return binary.BigEndian.Uint16(r.Data[i:])
}

// Reply is what a hook wants done with a request; a nil *Reply means "serve
// it normally".
type Reply struct {
	Delay     time.Duration // wait this long before acting
	Exception byte          // answer with this exception code
	Raw       []byte        // write these bytes instead of an answer
	NoReply   bool          // do not answer (the connection stays open)
	Close     bool          // close the connection after acting
	// SplitAfter > 0 writes the answer's first SplitAfter bytes, waits
	// SplitPause, then writes the rest (docs/modbus.md, fault C09: a slow slave
	// cuts its exception frame after 4 bytes).
	SplitAfter int
	SplitPause time.Duration
	// Sent, when set, gets a value once every byte of the reply is
	// written (a send that would block is skipped): a test that must
	// know trailing bytes are out before its next request waits for it.
	Sent chan<- struct{}
}

// NewModbusServer starts a Modbus TCP server on 127.0.0.1:0; t.Cleanup
// stops it.
func NewModbusServer(t testing.TB) *ModbusServer {
	t.Helper()
	return newServer(t, false)
}

// NewModbusRTUServer starts a server of RTU frames over TCP on 127.0.0.1:0,
// as a serial-to-Ethernet gateway with its slaves behind it would answer;
// t.Cleanup stops it. URL returns its rtu+tcp:// url.
func NewModbusRTUServer(t testing.TB) *ModbusServer {
	t.Helper()
	return newServer(t, true)
}

// NewModbusTables returns a server with no listener, for ServeRTU only.
func NewModbusTables(t testing.TB) *ModbusServer {
	t.Helper()
	s := &ModbusServer{
		t:        t,
		conns:    map[io.Closer]struct{}{},
		holding:  map[uint16]uint16{},
		input:    map[uint16]uint16{},
		coils:    map[uint16]bool{},
		discrete: map[uint16]bool{},
	}
	t.Cleanup(s.Stop)
	return s
}

func newServer(t testing.TB, rtu bool) *ModbusServer {
	t.Helper()
	s := &ModbusServer{
		t:        t,
		rtu:      rtu,
		conns:    map[io.Closer]struct{}{},
		holding:  map[uint16]uint16{},
		input:    map[uint16]uint16{},
		coils:    map[uint16]bool{},
		discrete: map[uint16]bool{},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("modbus server: listen: %v", err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

// Addr returns "127.0.0.1:port".
func (s *ModbusServer) Addr() string { return s.addr }

// URL returns the driver's url: "tcp://127.0.0.1:port", or
// "rtu+tcp://127.0.0.1:port" for NewModbusRTUServer.
func (s *ModbusServer) URL() string {
	if s.rtu {
		return "rtu+tcp://" + s.addr
	}
	return "tcp://" + s.addr
}

// ServeRTU serves RTU requests read from rw until it fails or Stop closes
// it, as a serial slave answering every unit id would. A request whose CRC
// is wrong is ignored, as on a real line.
func (s *ModbusServer) ServeRTU(rw io.ReadWriteCloser) {
	s.mu.Lock()
	s.conns[rw] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.handle(rw, true)
	}()
}

// SetHolding sets holding registers from addr on (making them exist).
func (s *ModbusServer) SetHolding(addr uint16, vals ...uint16) { s.setRegs(s.holding, addr, vals) }

// SetInput sets input registers from addr on.
func (s *ModbusServer) SetInput(addr uint16, vals ...uint16) { s.setRegs(s.input, addr, vals) }

// SetCoil sets coils from addr on.
func (s *ModbusServer) SetCoil(addr uint16, vals ...bool) { s.setBits(s.coils, addr, vals) }

// SetDiscrete sets discrete inputs from addr on.
func (s *ModbusServer) SetDiscrete(addr uint16, vals ...bool) { s.setBits(s.discrete, addr, vals) }

// Holding returns holding register addr and whether it exists.
func (s *ModbusServer) Holding(addr uint16) (uint16, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.holding[addr]
	return v, ok
}

// Coil returns coil addr and whether it exists.
func (s *ModbusServer) Coil(addr uint16) (bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.coils[addr]
	return v, ok
}

// SetHook makes fn decide about every later request (nil: serve normally).
func (s *ModbusServer) SetHook(fn func(Request) *Reply) {
	s.mu.Lock()
	s.hook = fn
	s.mu.Unlock()
}

// Requests returns the requests received so far.
func (s *ModbusServer) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Count returns how many requests the server has received.
func (s *ModbusServer) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Stop closes the listener and every connection and waits for them; the
// port is then refused. Safe to call twice.
func (s *ModbusServer) Stop() {
	s.mu.Lock()
	if s.ln != nil {
		_ = s.ln.Close() // test server: the accept loop ends either way
		s.ln = nil
	}
	for c := range s.conns {
		_ = c.Close()
		delete(s.conns, c)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Start listens again on the same port after Stop.
func (s *ModbusServer) Start() {
	s.t.Helper()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatalf("modbus server: listen again on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

func (s *ModbusServer) setRegs(m map[uint16]uint16, addr uint16, vals []uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, v := range vals {
		m[addr+uint16(i)] = v
	}
}

func (s *ModbusServer) setBits(m map[uint16]bool, addr uint16, vals []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, v := range vals {
		m[addr+uint16(i)] = v
	}
}

func (s *ModbusServer) serve(ln net.Listener) {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			if s.ln != ln {
				s.mu.Unlock()
				_ = c.Close()
				return
			}
			s.conns[c] = struct{}{}
			s.wg.Add(1)
			s.mu.Unlock()
			go func() {
				defer s.wg.Done()
				s.handle(c, s.rtu)
			}()
		}
	}()
}

func (s *ModbusServer) handle(c io.ReadWriteCloser, rtu bool) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	for {
		var raw []byte
		var err error
		if rtu {
			raw, err = readRTURequest(c)
		} else {
			raw, err = readTCPRequest(c)
		}
		if err != nil {
			return
		}
		if raw == nil {
			continue // RTU frame with a bad CRC: ignored
		}
		s.mu.Lock()
		req := Request{N: len(s.reqs) + 1, Raw: raw, At: time.Now()}
		if rtu {
			req.Unit, req.Function, req.Data = raw[0], raw[1], append([]byte(nil), raw[2:len(raw)-2]...)
		} else {
			req.TxID, req.Unit, req.Function = binary.BigEndian.Uint16(raw), raw[6], raw[7]
			req.Data = append([]byte(nil), raw[8:]...)
		}
		s.reqs = append(s.reqs, req)
		hook := s.hook
		s.mu.Unlock()
		var rep *Reply
		if hook != nil {
			rep = hook(req)
		}
		if rep == nil {
			rep = &Reply{}
		}
		if rep.Delay > 0 {
			time.Sleep(rep.Delay)
		}
		answer := func(fc byte, data []byte) []byte {
			if rtu {
				return RTUFrame(req.Unit, fc, data)
			}
			return frame(req, fc, data)
		}
		var out []byte
		switch {
		case rep.NoReply:
		case rep.Raw != nil:
			out = rep.Raw
		case rep.Exception != 0:
			out = answer(req.Function|0x80, []byte{rep.Exception})
		default:
			pdu, exc := s.serveRequest(req)
			if exc != 0 {
				out = answer(req.Function|0x80, []byte{exc})
			} else {
				out = answer(req.Function, pdu)
			}
		}
		if out != nil {
			if n := rep.SplitAfter; n > 0 && n < len(out) {
				if _, err := c.Write(out[:n]); err != nil {
					return
				}
				time.Sleep(rep.SplitPause)
				out = out[n:]
			}
			if _, err := c.Write(out); err != nil {
				return
			}
		}
		if rep.Sent != nil {
			select {
			case rep.Sent <- struct{}{}:
			default:
			}
		}
		if rep.Close {
			return
		}
	}
}

func readTCPRequest(c io.Reader) ([]byte, error) {
	var hdr [7]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[4:]))
	if n < 2 || n > 254 {
		return nil, io.ErrUnexpectedEOF
	}
	raw := make([]byte, 6+n)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(c, raw[7:]); err != nil {
		return nil, err
	}
	return raw, nil
}

// readRTURequest reads one RTU request frame, its length known from the
// function code (Modbus Application Protocol §6); nil for a frame whose
// CRC is wrong.
func readRTURequest(c io.Reader) ([]byte, error) {
	raw := make([]byte, 2, 256)
	if _, err := io.ReadFull(c, raw); err != nil {
		return nil, err
	}
	var rest int
	switch raw[1] {
	case 1, 2, 3, 4, 5, 6:
		rest = 4 + 2
	case 15, 16:
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(c, hdr); err != nil {
			return nil, err
		}
		raw = append(raw, hdr...)
		rest = int(hdr[4]) + 2
	default:
		return nil, io.ErrUnexpectedEOF // cannot frame it: give up the line
	}
	tail := make([]byte, rest)
	if _, err := io.ReadFull(c, tail); err != nil {
		return nil, err
	}
	raw = append(raw, tail...)
	if CRC16(raw[:len(raw)-2]) != binary.LittleEndian.Uint16(raw[len(raw)-2:]) {
		return nil, nil
	}
	return raw, nil
}

// RTUFrame builds a Modbus RTU ADU: slave address, function code, data and
// the CRC-16/MODBUS low byte first (Modbus over Serial Line V1.02 §2.5.1).
// Hooks use it to build hostile answers.
func RTUFrame(unit, fc byte, data []byte) []byte {
	b := append([]byte{unit, fc}, data...)
	return binary.LittleEndian.AppendUint16(b, CRC16(b))
}

// CRC16 is the CRC-16/MODBUS of b (polynomial 0x8005 reflected, initial
// 0xFFFF), computed from a table, independently of the driver's own.
func CRC16(b []byte) uint16 {
	crc := uint16(0xFFFF)
	for _, x := range b {
		crc = crc>>8 ^ crcTable[byte(crc)^x]
	}
	return crc
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xA001
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}()

// Frame builds a response ADU to req with function code fc and PDU data.
func frame(req Request, fc byte, data []byte) []byte {
	return Frame(req.TxID, req.Unit, fc, data)
}

// Frame builds a Modbus TCP ADU: MBAP header (txid, protocol 0, length, unit)
// and the PDU (fc, data). Hooks use it to build hostile answers.
func Frame(txid uint16, unit, fc byte, data []byte) []byte {
	b := make([]byte, 8+len(data))
	binary.BigEndian.PutUint16(b, txid)
	binary.BigEndian.PutUint16(b[4:], uint16(2+len(data)))
	b[6], b[7] = unit, fc
	copy(b[8:], data)
	return b
}

// serveRequest answers a standard request from the tables; exc is the
// exception code when it fails.
func (s *ModbusServer) serveRequest(r Request) (pdu []byte, exc byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	addr, qty := r.Address(), int(r.Quantity())
	switch r.Function {
	case 3, 4:
		m := s.holding
		if r.Function == 4 {
			m = s.input
		}
		if len(r.Data) != 4 || qty < 1 || qty > 125 {
			return nil, 3
		}
		out := []byte{byte(2 * qty)}
		for i := range qty {
			v, ok := m[addr+uint16(i)]
			if !ok || int(addr)+i > 65535 {
				return nil, 2
			}
			out = binary.BigEndian.AppendUint16(out, v)
		}
		return out, 0
	case 1, 2:
		m := s.coils
		if r.Function == 2 {
			m = s.discrete
		}
		if len(r.Data) != 4 || qty < 1 || qty > 2000 {
			return nil, 3
		}
		out := make([]byte, 1+(qty+7)/8)
		out[0] = byte((qty + 7) / 8)
		for i := range qty {
			v, ok := m[addr+uint16(i)]
			if !ok || int(addr)+i > 65535 {
				return nil, 2
			}
			if v {
				out[1+i/8] |= 1 << (i % 8)
			}
		}
		return out, 0
	case 5:
		if len(r.Data) != 4 || (qty != 0xFF00 && qty != 0) {
			return nil, 3
		}
		if _, ok := s.coils[addr]; !ok {
			return nil, 2
		}
		s.coils[addr] = qty == 0xFF00
		return r.Data[:4], 0
	case 6:
		if len(r.Data) != 4 {
			return nil, 3
		}
		if _, ok := s.holding[addr]; !ok {
			return nil, 2
		}
		s.holding[addr] = uint16(qty)
		return r.Data[:4], 0
	case 15:
		if len(r.Data) < 5 || qty < 1 || qty > 1968 || int(r.Data[4]) != (qty+7)/8 || len(r.Data) != 5+(qty+7)/8 {
			return nil, 3
		}
		for i := range qty {
			if _, ok := s.coils[addr+uint16(i)]; !ok {
				return nil, 2
			}
		}
		for i := range qty {
			s.coils[addr+uint16(i)] = r.Data[5+i/8]>>(i%8)&1 == 1
		}
		return r.Data[:4], 0
	case 16:
		if len(r.Data) < 5 || qty < 1 || qty > 123 || int(r.Data[4]) != 2*qty || len(r.Data) != 5+2*qty {
			return nil, 3
		}
		for i := range qty {
			if _, ok := s.holding[addr+uint16(i)]; !ok {
				return nil, 2
			}
		}
		for i := range qty {
			s.holding[addr+uint16(i)] = binary.BigEndian.Uint16(r.Data[5+2*i:])
		}
		return r.Data[:4], 0
	}
	return nil, 1
}
