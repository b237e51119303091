package modbus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/goburrow/modbus"

	"qubiq.dev/edge/value"
)

// adu builds a Modbus TCP frame.
func adu(txid uint16, unit, fc byte, data ...byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, txid)
	b = append(b, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(2+len(data)))
	return append(append(b, unit, fc), data...)
}

func TestCheckResponse_Frames(t *testing.T) {
	readHR := adu(1, 1, 3, 0x00, 0x6D, 0x00, 0x02) // HR109 qty 2
	readCO := adu(1, 1, 1, 0x00, 0x00, 0x00, 0x0A) // coils 0..9
	writeHR := adu(1, 1, 6, 0x00, 0x0A, 0xFF, 0xEC)
	writeMul := adu(1, 1, 16, 0x00, 0x0A, 0x00, 0x01, 0x02, 0xFF, 0xEC)
	tests := []struct {
		name      string
		req, resp []byte
		ok        bool
	}{
		{"read ok", readHR, adu(1, 1, 3, 4, 0x41, 0xE0, 0xC1, 0x90), true},
		{"coils ok", readCO, adu(1, 1, 1, 2, 0xFF, 0x03), true},
		{"exception ok", readHR, adu(1, 1, 0x83, 2), true},
		{"write single ok", writeHR, adu(1, 1, 6, 0x00, 0x0A, 0xFF, 0xEC), true},
		{"write multiple ok", writeMul, adu(1, 1, 16, 0x00, 0x0A, 0x00, 0x01), true},
		{"empty", readHR, nil, false},
		{"header only", readHR, adu(1, 1, 3)[:7], false},
		{"wrong txid", readHR, adu(2, 1, 3, 4, 0, 0, 0, 0), false},
		{"protocol id", readHR, func() []byte { b := adu(1, 1, 3, 4, 0, 0, 0, 0); b[3] = 1; return b }(), false},
		{"length field", readHR, func() []byte { b := adu(1, 1, 3, 4, 0, 0, 0, 0); b[5]++; return b }(), false},
		{"wrong unit", readHR, adu(1, 2, 3, 4, 0, 0, 0, 0), false},
		{"wrong function", readHR, adu(1, 1, 4, 4, 0, 0, 0, 0), false},
		{"other exception function", readHR, adu(1, 1, 0x84, 2), false},
		{"exception without code", readHR, adu(1, 1, 0x83), false},
		{"exception with extra bytes", readHR, adu(1, 1, 0x83, 2, 0), false},
		{"no byte count", readHR, adu(1, 1, 3), false},
		{"byte count vs quantity", readHR, adu(1, 1, 3, 2, 0, 0), false},
		{"byte count vs data", readHR, adu(1, 1, 3, 4, 0, 0), false},
		{"coil byte count", readCO, adu(1, 1, 1, 1, 0xFF), false},
		{"write echo", writeHR, adu(1, 1, 6, 0x00, 0x0A, 0x00, 0x00), false},
		{"write short", writeHR, adu(1, 1, 6, 0x00, 0x0A), false},
		{"oversized PDU", readHR, adu(1, 1, 3, make([]byte, 253)...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkResponse(tt.req, tt.resp)
			if tt.ok && err != nil {
				t.Errorf("checkResponse: %v", err)
			}
			if !tt.ok && !errors.Is(err, errBadFrame) {
				t.Errorf("checkResponse = %v, want errBadFrame", err)
			}
		})
	}
}

func TestReadFrame_Hostile(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"ok", adu(1, 1, 3, 2, 0, 7), nil},
		{"nothing", nil, io.EOF},
		{"cut header", []byte{0, 1, 0}, io.ErrUnexpectedEOF},
		{"cut body", adu(1, 1, 3, 2, 0, 7)[:10], io.ErrUnexpectedEOF},
		{"length 0", []byte{0, 1, 0, 0, 0, 0, 1}, errBadFrame},
		{"length 1", []byte{0, 1, 0, 0, 0, 1, 1}, errBadFrame},
		{"length 300", []byte{0, 1, 0, 0, 0x01, 0x2C, 1}, errBadFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if tt.want == nil {
				in = append(append([]byte(nil), in...), 0xAA, 0xBB) // must stay unread
			}
			r := bytes.NewReader(in)
			f, err := readFrame(r, nil)
			if tt.want == nil {
				if err != nil || !bytes.Equal(f, tt.in) {
					t.Errorf("readFrame = % X, %v; want % X", f, err, tt.in)
				}
				if r.Len() != 2 {
					t.Errorf("readFrame read past the frame: %d bytes left, want 2", r.Len())
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("readFrame = %v, want %v", err, tt.want)
			}
		})
	}
}

// replay is a modbus.Transporter that answers with a fixed frame, checked as
// link's transport checks it.
type replay struct{ resp []byte }

func (r replay) Send(req []byte) ([]byte, error) {
	f, err := readFrame(bytes.NewReader(r.resp), nil)
	if err != nil {
		return nil, err
	}
	if err := checkResponse(req, f); err != nil {
		return nil, err
	}
	return f, nil
}

// FuzzResponse feeds hostile bytes through the whole response path the
// driver owns: readFrame, checkResponse, goburrow's parsing of what passed,
// and the register codec. Nothing may panic, and a response that passes
// must carry exactly the bytes asked for (docs/architecture.md, Rules from the field: ours is
// fuzzed).
func FuzzResponse(f *testing.F) {
	f.Add(uint8(3), uint16(2), adu(1, 1, 3, 4, 0x41, 0xE0, 0xC1, 0x90))
	f.Add(uint8(3), uint16(1), adu(1, 1, 0x83, 2))
	f.Add(uint8(1), uint16(10), adu(1, 1, 1, 2, 0xFF, 0x03))
	f.Add(uint8(4), uint16(4), adu(1, 1, 4, 8, 1, 2, 3, 4, 5, 6, 7, 8))
	f.Add(uint8(3), uint16(1), adu(2, 1, 3, 2, 0, 7))
	f.Add(uint8(3), uint16(1), []byte{0, 1, 0, 0, 0, 0})
	f.Add(uint8(3), uint16(1), []byte{0, 1, 0, 0, 0, 3, 1, 3, 0})
	f.Add(uint8(6), uint16(0xFFEC), adu(1, 1, 6, 0, 0, 0xFF, 0xEC))
	f.Add(uint8(16), uint16(2), adu(1, 1, 16, 0, 0, 0, 2))
	f.Fuzz(func(t *testing.T, fc uint8, qty uint16, resp []byte) {
		h := modbus.NewTCPClientHandler("fuzz:502")
		h.SlaveId = 1
		c := modbus.NewClient2(h, replay{resp})
		var res []byte
		var err error
		switch fc % 6 {
		case 0:
			res, err = c.ReadHoldingRegisters(0, qty%126)
		case 1:
			res, err = c.ReadInputRegisters(0, qty%126)
		case 2:
			res, err = c.ReadCoils(0, qty%2001)
		case 3:
			res, err = c.ReadDiscreteInputs(0, qty%2001)
		case 4:
			res, err = c.WriteSingleRegister(0, qty)
		case 5:
			res, err = c.WriteMultipleRegisters(0, 1, binary.BigEndian.AppendUint16(nil, qty))
		}
		if err != nil {
			return
		}
		switch fc % 6 {
		case 0, 1:
			if len(res) != 2*int(qty%126) {
				t.Fatalf("accepted %d bytes for %d registers", len(res), qty%126)
			}
			for _, typ := range []value.Type{value.Int16, value.Uint32, value.Float32, value.Float64} {
				for o := ABCD; o <= DCBA; o++ {
					_, _ = decodeRegisters(spec{addr: Address{Table: HoldingRegister, Bit: -1}, typ: typ, order: o}, res)
				}
			}
			_, _ = decodeRegisters(spec{addr: Address{Table: HoldingRegister, Bit: -1, Length: len(res) / 2}, typ: value.String}, res)
		case 2, 3:
			if len(res) != (int(qty%2001)+7)/8 {
				t.Fatalf("accepted %d bytes for %d bits", len(res), qty%2001)
			}
			for i := 0; i < int(qty%2001); i++ {
				if _, err := decodeBit(res, i); err != nil {
					t.Fatalf("bit %d of an accepted response: %v", i, err)
				}
			}
		}
	})
}
