package modbus

import (
	"encoding/binary"
	"errors"
	"io"
	"time"
)

// RTU framing (Modbus over Serial Line V1.02 §2.5.1): slave address,
// function code, data, CRC-16/MODBUS low byte first; 256 bytes at most.
const (
	rtuMaxADU       = 256
	rtuExceptionADU = 5 // address, function | 0x80, exception code, CRC
)

// crc16 is the CRC-16/MODBUS of b (Modbus over Serial Line V1.02 §6.2.2:
// polynomial 0xA001 reflected, initial value 0xFFFF). It goes on the wire
// low byte first.
func crc16(b []byte) uint16 {
	crc := uint16(0xFFFF)
	for _, x := range b {
		crc ^= uint16(x)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xA001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}

// readRTUFrame reads the one RTU response to the request ADU req from r and
// verifies it (docs/architecture.md, Rules from the field: parse every response as hostile).
//
// The frame's end is found from its content, never from a silence: after
// the address and function bytes it reads exactly 3 more bytes when the
// function byte is the request's with the 0x80 exception bit set (a 5-byte
// exception frame), the byte count and that many data bytes and the CRC for
// a read, or the 4-byte echo and the CRC for a write, waiting for each piece
// until r's deadline. This is where goburrow/modbus v0.1.0's RTU transport
// fails (goburrow/modbus#81, docs/modbus.md, fault C09): it tests for an exception
// with `function & 0x80` (always 0) instead of `function | 0x80`, so it never
// sees one; it reads what has arrived after a fixed sleep, so a slave that
// sends the exception frame as 4 bytes, a pause, and 1 byte gives it a CRC
// error, and the leftover byte starts its next answer ("response slave id
// '241' does not match request '1'", goburrow/modbus#8). Gaps between the
// characters of one frame (t1.5) are tolerated on purpose: USB adapters and
// slow slaves break them all the time, and the length and CRC checks are
// stricter than the timer.
//
// Every error but an I/O error from r wraps errBadFrame: a slave address or
// function code that does not answer the request, a byte count other than
// the quantity asked, a write echo that differs, a CRC mismatch.
func readRTUFrame(r io.Reader, req []byte) ([]byte, error) {
	if len(req) < 4 {
		return nil, badFrame("request of %d bytes", len(req))
	}
	var buf [rtuMaxADU]byte
	if _, err := io.ReadFull(r, buf[:2]); err != nil {
		return nil, err
	}
	if buf[0] != req[0] {
		return nil, badFrame("slave address %d does not match request %d", buf[0], req[0])
	}
	fc, rfc := buf[1], req[1]
	n := 0
	switch {
	case fc == rfc|0x80:
		n = rtuExceptionADU
	case fc != rfc:
		return nil, badFrame("function code 0x%02X does not answer request 0x%02X", fc, rfc)
	case rfc >= 1 && rfc <= 4:
		if len(req) < 8 {
			return nil, badFrame("read request without quantity")
		}
		qty := int(binary.BigEndian.Uint16(req[4:]))
		want := 2 * qty
		if rfc <= 2 {
			want = (qty + 7) / 8
		}
		if _, err := readFull(r, buf[2:3]); err != nil {
			return nil, err
		}
		if int(buf[2]) != want {
			return nil, badFrame("byte count %d, want %d for quantity %d", buf[2], want, qty)
		}
		n = 3 + want + 2
	case rfc == 5 || rfc == 6 || rfc == 15 || rfc == 16:
		n = 8
	default:
		return nil, badFrame("function code 0x%02X: no RTU framing known", rfc)
	}
	if n > rtuMaxADU {
		return nil, badFrame("frame of %d bytes exceeds %d", n, rtuMaxADU)
	}
	got := 2
	if fc == rfc && rfc <= 4 {
		got = 3
	}
	if _, err := readFull(r, buf[got:n]); err != nil {
		return nil, err
	}
	frame := buf[:n]
	if want, sum := crc16(frame[:n-2]), binary.LittleEndian.Uint16(frame[n-2:]); sum != want {
		return nil, badFrame("CRC 0x%04X does not match the frame's 0x%04X", sum, want)
	}
	if fc == rfc && (rfc == 5 || rfc == 6 || rfc == 15 || rfc == 16) && string(frame[2:6]) != string(req[2:6]) {
		return nil, badFrame("write response echoes % X, request was % X", frame[2:6], req[2:6])
	}
	return append([]byte(nil), frame...), nil
}

// readFull is io.ReadFull that reports a frame cut short as
// io.ErrUnexpectedEOF, not io.EOF.
func readFull(r io.Reader, b []byte) (int, error) {
	n, err := io.ReadFull(r, b)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// interFrame is t3.5, the silence that separates two RTU frames on a serial
// line of the given bit rate and character size in bits (start, data,
// parity, stop): 3.5 character times, and a fixed 1750 µs above 19200 baud
// (Modbus over Serial Line V1.02 §2.5.1.1).
func interFrame(baud, charBits int) time.Duration {
	if baud <= 0 || baud > 19200 {
		return 1750 * time.Microsecond
	}
	return time.Duration(float64(time.Second) * 3.5 * float64(charBits) / float64(baud))
}
