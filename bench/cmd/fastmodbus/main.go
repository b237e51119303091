// Command fastmodbus is the benchmarks' Modbus TCP server: fast enough not
// to be what a benchmark measures. It listens on -ports loopback ports
// (one device each) and answers every unit id from one table of 65,536
// holding registers (FC3; FC4 reads the same table) with function codes
// 1-6, 15 and 16 of the Modbus Application Protocol V1.1b3 (§6). Register
// i reads as uint16(i*7 + s) where s counts the seconds since start, so
// every value changes once per second (-static: never). Coils and
// discrete inputs read as zero; writes are stored and acknowledged. It
// prints "READY port,port,..." on stdout when it listens, answers each
// line on stdin with the number of requests served so far, and runs until
// stdin closes or it is killed. No allocation per request: one buffer per
// connection.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

var (
	static = flag.Bool("static", false, "values never change")
	nPorts = flag.Int("ports", 1, "loopback ports to listen on, one device each")

	written  [65536]atomic.Int32 // -1: not written; else the value written
	start    = time.Now()
	requests atomic.Int64
)

func main() {
	flag.Parse()
	for i := range written {
		written[i].Store(-1)
	}
	var ports []string
	for range *nPorts {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.Stderr.WriteString("fastmodbus: " + err.Error() + "\n")
			os.Exit(1)
		}
		ports = append(ports, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		go accept(ln)
	}
	os.Stdout.WriteString("READY " + strings.Join(ports, ",") + "\n")
	sc := bufio.NewScanner(os.Stdin) // until the harness closes stdin
	for sc.Scan() {
		os.Stdout.WriteString(strconv.FormatInt(requests.Load(), 10) + "\n")
	}
}

func accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serve(c)
	}
}

func reg(a int, tick uint16) uint16 {
	if w := written[a].Load(); w >= 0 {
		return uint16(w)
	}
	if *static {
		return uint16(a * 7)
	}
	return uint16(a*7) + tick
}

func serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 4096)
	var in [260]byte
	var out [260]byte
	for {
		if _, err := io.ReadFull(r, in[:7]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(in[4:6]))
		if n < 2 || n > 254 {
			return
		}
		if _, err := io.ReadFull(r, in[7:6+n]); err != nil {
			return
		}
		requests.Add(1)
		pdu := in[7 : 6+n]
		copy(out[:7], in[:7])
		resp := answer(pdu, out[7:])
		binary.BigEndian.PutUint16(out[4:6], uint16(1+len(resp)))
		if _, err := c.Write(out[:7+len(resp)]); err != nil {
			return
		}
	}
}

// answer writes the response PDU for pdu into o and returns it.
func answer(pdu, o []byte) []byte {
	fc := pdu[0]
	exc := func(code byte) []byte { o[0], o[1] = fc|0x80, code; return o[:2] }
	if len(pdu) < 5 {
		return exc(3)
	}
	addr, qty := int(binary.BigEndian.Uint16(pdu[1:])), int(binary.BigEndian.Uint16(pdu[3:]))
	switch fc {
	case 3, 4:
		if qty < 1 || qty > 125 {
			return exc(3)
		}
		if addr+qty > 65536 {
			return exc(2)
		}
		tick := uint16(time.Since(start) / time.Second)
		o[0], o[1] = fc, byte(2*qty)
		for i := range qty {
			binary.BigEndian.PutUint16(o[2+2*i:], reg(addr+i, tick))
		}
		return o[:2+2*qty]
	case 1, 2:
		if qty < 1 || qty > 2000 {
			return exc(3)
		}
		if addr+qty > 65536 {
			return exc(2)
		}
		nb := (qty + 7) / 8
		o[0], o[1] = fc, byte(nb)
		clear(o[2 : 2+nb])
		return o[:2+nb]
	case 5, 6:
		if fc == 6 {
			written[addr].Store(int32(qty))
		}
		copy(o, pdu[:5])
		return o[:5]
	case 15, 16:
		if fc == 16 && len(pdu) >= 6+2*qty {
			for i := range qty {
				if addr+i < 65536 {
					written[addr+i].Store(int32(binary.BigEndian.Uint16(pdu[6+2*i:])))
				}
			}
		}
		copy(o, pdu[:5])
		return o[:5]
	}
	return exc(1)
}
