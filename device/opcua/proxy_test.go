package opcua

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// tcpProxy forwards a loopback port to a server, and can block the path
// (bytes stop flowing both ways, connections stay open, new ones hang: a
// cable pulled between switches) or reset every connection (RST).
type tcpProxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu      sync.Mutex
	blocked bool
	unblock chan struct{}
	conns   map[net.Conn]struct{}
	accepts int
}

func startProxy(t testing.TB, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{t: t, ln: ln, target: target, unblock: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.unblock)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.Reset()
	})
	return p
}

func (p *tcpProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *tcpProxy) Accepts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

func (p *tcpProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepts++
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.handle(c)
	}
}

func (p *tcpProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unblock
}

func (p *tcpProxy) handle(c net.Conn) {
	<-p.gate()
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[s] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(s, c) })
	wg.Go(func() { p.pipe(c, s) })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// pipe copies src to dst, holding each chunk while the path is blocked.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// Block stops the flow of bytes.
func (p *tcpProxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.blocked {
		p.blocked = true
		p.unblock = make(chan struct{})
	}
}

// Unblock lets bytes flow again.
func (p *tcpProxy) Unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked {
		p.blocked = false
		close(p.unblock)
	}
}

// Reset closes every connection with an RST.
func (p *tcpProxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}
