// Command modbusfloor is bench-devices' floor (bench/README.md): the least
// any Modbus TCP client can do to read the benchmark's registers. For each
// of -ports loopback ports it holds one connection and, every -period,
// sends the same read holding registers requests (FC3) as qubiqd's plan:
// -registers contiguous registers from 0 in requests of at most -max
// (even, so that no float32 straddles two requests), back to back, each a
// frame built once at start, its response read whole into one buffer and
// checked only for its transaction id, function code and length (Modbus
// Messaging on TCP/IP Implementation Guide V1.0b §3.1.3; Modbus
// Application Protocol V1.1b3 §6.3). Nothing is decoded, stored or
// published: what it costs is the system calls and the wire, the part of
// a scan no client avoids.
//
// It prints "READY" on stdout when every connection is up, answers each
// line on stdin with the count of requests answered so far, and exits
// when stdin closes. A failed request ends the process with an error on
// stderr.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

var answered atomic.Int64

func main() {
	ports := flag.String("ports", "", "comma-separated loopback ports, one device each")
	registers := flag.Int("registers", 2000, "contiguous holding registers per device, from 0")
	maxRegs := flag.Int("max", 124, "registers per request at most (1 to 125)")
	period := flag.Duration("period", time.Second, "scan period")
	flag.Parse()
	if *ports == "" || *maxRegs < 1 || *maxRegs > 125 || *registers < 1 {
		fail(fmt.Errorf("usage: modbusfloor -ports=P,P,... [-registers=2000] [-max=124] [-period=1s]"))
	}
	var conns []net.Conn
	for _, p := range strings.Split(*ports, ",") {
		c, err := net.Dial("tcp", "127.0.0.1:"+p)
		if err != nil {
			fail(err)
		}
		conns = append(conns, c)
	}
	frames := requests(*registers, *maxRegs)
	for _, c := range conns {
		go scan(c, frames, *period)
	}
	os.Stdout.WriteString("READY\n")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		os.Stdout.WriteString(strconv.FormatInt(answered.Load(), 10) + "\n")
	}
}

// request is one FC3 request frame and the length of its response.
type request struct {
	frame    []byte
	response int
}

// requests builds the frames: MBAP header (transaction id, protocol 0,
// length 6, unit 1) and PDU (FC3, start, count).
func requests(registers, maxRegs int) []request {
	var out []request
	for start := 0; start < registers; start += maxRegs {
		n := min(maxRegs, registers-start)
		f := make([]byte, 12)
		binary.BigEndian.PutUint16(f[2:], 0)
		binary.BigEndian.PutUint16(f[4:], 6)
		f[6], f[7] = 1, 3
		binary.BigEndian.PutUint16(f[8:], uint16(start))
		binary.BigEndian.PutUint16(f[10:], uint16(n))
		out = append(out, request{frame: f, response: 9 + 2*n})
	}
	return out
}

func scan(c net.Conn, reqs []request, period time.Duration) {
	buf := make([]byte, 9+2*125)
	var tid uint16
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		for _, r := range reqs {
			tid++
			binary.BigEndian.PutUint16(r.frame[0:], tid)
			if _, err := c.Write(r.frame); err != nil {
				fail(err)
			}
			if _, err := io.ReadFull(c, buf[:r.response]); err != nil {
				fail(err)
			}
			if binary.BigEndian.Uint16(buf[0:]) != tid || buf[7] != 3 || int(buf[8]) != r.response-9 {
				fail(fmt.Errorf("unexpected response % x", buf[:9]))
			}
			answered.Add(1)
		}
		<-t.C
	}
}

func fail(err error) {
	os.Stderr.WriteString("modbusfloor: " + err.Error() + "\n")
	os.Exit(1)
}
