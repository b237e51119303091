package modbus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Modbus TCP framing (Modbus Messaging on TCP/IP Implementation Guide
// V1.0b §3.1.3; Modbus Application Protocol V1.1b3 §4.1).
const (
	mbapHeaderSize = 7   // transaction id, protocol id, length, unit id
	maxPDUSize     = 253 // function code + data
)

// errBadFrame is wrapped by every response that fails verification: a
// transaction, protocol or unit id that does not match the request, a length
// or byte count that disagrees with the frame or with the quantity asked, a
// function code that answers another request. The connection that carried
// it is closed (docs/modbus.md, fault C08).
var errBadFrame = errors.New("bad response frame")

func badFrame(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadFrame}, args...)...)
}

// maxADUSize is the largest MBAP frame: the header and the largest PDU.
const maxADUSize = mbapHeaderSize + maxPDUSize

// readFrame reads one MBAP frame from r into buf (a new array when nil)
// and returns it, a slice of buf. It never reads past the frame: the
// length field is checked against the PDU size limit first (docs/architecture.md,
// Rules from the field: parse every response as hostile).
func readFrame(r io.Reader, buf *[maxADUSize]byte) ([]byte, error) {
	if buf == nil {
		buf = new([maxADUSize]byte)
	}
	hdr := buf[:mbapHeaderSize]
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	length := int(binary.BigEndian.Uint16(hdr[4:]))
	if length < 2 || length > maxPDUSize+1 {
		return nil, badFrame("MBAP length %d out of range 2..%d", length, maxPDUSize+1)
	}
	frame := buf[:6+length]
	if _, err := io.ReadFull(r, frame[mbapHeaderSize:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return frame, nil
}

// checkResponse verifies the response ADU resp against the request ADU req:
// transaction id, protocol id, length field, unit id, function code (the
// request's, or the request's with the 0x80 exception bit and exactly one
// exception code), and for reads the byte count against the quantity asked,
// for writes the echoed address and value or quantity. A nil error means
// goburrow's client can parse resp without surprise. Every error wraps
// errBadFrame.
func checkResponse(req, resp []byte) error {
	if len(req) < mbapHeaderSize+1 {
		return badFrame("request of %d bytes", len(req))
	}
	if len(resp) < mbapHeaderSize+1 {
		return badFrame("short frame of %d bytes", len(resp))
	}
	if got, want := binary.BigEndian.Uint16(resp), binary.BigEndian.Uint16(req); got != want {
		return badFrame("transaction id %d does not match request %d", got, want)
	}
	if p := binary.BigEndian.Uint16(resp[2:]); p != 0 {
		return badFrame("protocol id %d, want 0", p)
	}
	if l := int(binary.BigEndian.Uint16(resp[4:])); l != len(resp)-6 {
		return badFrame("length field %d does not match frame of %d bytes", l, len(resp))
	}
	if len(resp)-mbapHeaderSize > maxPDUSize {
		return badFrame("PDU of %d bytes exceeds %d", len(resp)-mbapHeaderSize, maxPDUSize)
	}
	if resp[6] != req[6] {
		return badFrame("unit id %d does not match request %d", resp[6], req[6])
	}
	fc, rfc := resp[7], req[7]
	data, rdata := resp[8:], req[8:]
	if fc == rfc|0x80 {
		if len(data) != 1 {
			return badFrame("exception response with %d data bytes, want 1", len(data))
		}
		return nil
	}
	if fc != rfc {
		return badFrame("function code 0x%02X does not answer request 0x%02X", fc, rfc)
	}
	switch rfc {
	case 1, 2, 3, 4:
		if len(rdata) < 4 {
			return badFrame("read request without quantity")
		}
		qty := int(binary.BigEndian.Uint16(rdata[2:]))
		want := 2 * qty
		if rfc <= 2 {
			want = (qty + 7) / 8
		}
		if len(data) < 1 {
			return badFrame("no byte count")
		}
		if int(data[0]) != want {
			return badFrame("byte count %d, want %d for quantity %d", data[0], want, qty)
		}
		if len(data)-1 != want {
			return badFrame("%d data bytes, byte count says %d", len(data)-1, want)
		}
	case 5, 6, 15, 16:
		if len(data) != 4 || len(rdata) < 4 {
			return badFrame("write response with %d data bytes, want 4", len(data))
		}
		if string(data[:4]) != string(rdata[:4]) {
			return badFrame("write response echoes % X, request was % X", data[:4], rdata[:4])
		}
	}
	return nil
}
