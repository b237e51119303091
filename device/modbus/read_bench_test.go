package modbus

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"

	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// benchServer is a Modbus TCP server for the benchmarks that allocates
// nothing per request (as bench/cmd/fastmodbus): register i reads as
// uint16(i*7 + tick), tick bumped by every request unless static, so
// every value changes from one scan to the next (static: never).
func benchServer(b *testing.B, static bool) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReaderSize(c, 4096)
				var in, out [260]byte
				tick := uint16(0)
				for {
					if _, err := io.ReadFull(r, in[:12]); err != nil {
						return
					}
					if !static {
						tick++
					}
					addr, qty := int(binary.BigEndian.Uint16(in[8:])), int(binary.BigEndian.Uint16(in[10:]))
					copy(out[:7], in[:7])
					out[7], out[8] = in[7], byte(2*qty)
					for i := range qty {
						binary.BigEndian.PutUint16(out[9+2*i:], uint16((addr+i)*7)+tick)
					}
					binary.BigEndian.PutUint16(out[4:], uint16(3+2*qty))
					if _, err := c.Write(out[:9+2*qty]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "tcp://" + ln.Addr().String()
}

// BenchmarkReadFloat32: one scan of 1,000 float32 points (2,000
// contiguous holding registers, 16 requests), bench-devices' device;
// "changing": every value differs from the last scan's, "static": none.
func BenchmarkReadFloat32(b *testing.B) {
	for _, mode := range []string{"changing", "static"} {
		b.Run(mode, func(b *testing.B) { benchReadFloat32(b, mode == "static") })
	}
}

func benchReadFloat32(b *testing.B, static bool) {
	c := DefaultConfig
	c.URL = benchServer(b, static)
	d := NewDriver("bench", c, nil)
	if err := d.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close(context.Background()) })
	points := make([]device.Point, 1000)
	for i := range points {
		points[i] = device.Point{Tag: fmt.Sprintf("D/P%04d", i), Address: fmt.Sprintf("HR%d", 2*i), Type: value.Float32}
	}
	out := make([]value.VQT, len(points))
	ctx, cancel := context.WithCancel(context.Background()) // as the scans' context
	defer cancel()
	d.ReadInto(ctx, points, out)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		d.ReadInto(ctx, points, out)
	}
	b.StopTimer()
	for i, v := range out {
		if v.Quality != value.Good {
			b.Fatalf("point %d: %s %s", i, v.Quality, v.Reason)
		}
	}
}
