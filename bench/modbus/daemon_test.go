//go:build bench

package modbusbench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/bench/harness"
)

// daemonProject is the layout as a qubiqd project: one Modbus device
// through the counting proxy, every tag at period, the driver's defaults
// for merging (the same max_gap and max_registers_per_request as the
// scanner's).
func daemonProject(l Layout, proxy *countingProxy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "devices:\n  - {name: plc1, driver: modbus, url: \"tcp://%s\", unit_id: 1, timeout: 1s}\ntags:\n", proxy.addr())
	for _, tg := range l.Tags {
		p := tg.Point
		fmt.Fprintf(&b, "  - {path: %s, device: plc1, address: \"%s\", type: %s, scan: %s", p.Tag, p.Address, p.Type, period)
		if p.ByteOrder != "" {
			fmt.Fprintf(&b, ", byte_order: %s", p.ByteOrder)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// daemon runs bin/qubiqd over the layout, as a user runs it (tag engine,
// store, API and two Python workers up), pinned to core 0 with its
// workers, and measures over nScans periods after it has scanned twice
// and 2 s more: CPU seconds of its whole process tree, its own peak RSS
// and the tree's, and the requests per scan on the wire.
func daemon(t *testing.T, l Layout, proxy *countingProxy, srv server, fig map[string]float64) {
	t.Helper()
	req0 := proxy.requests.Load()
	d := harness.Start(t, harness.Options{Project: daemonProject(l, proxy)})
	defer d.Stop()
	deadline := time.Now().Add(60 * time.Second)
	perScan := int64(fig["min_requests_per_scan"])
	for proxy.requests.Load()-req0 < 2*perScan {
		if time.Now().After(deadline) {
			t.Fatalf("qubiqd sent %d requests in 60 s, want %d; its log:\n%s", proxy.requests.Load()-req0, 2*perScan, d.LogTail(4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	req1, py0 := proxy.requests.Load(), procCPU(t, srv.pid)
	profiled := harness.ProfileWindow(t, d, "qubiqd", time.Duration(nScans)*period)
	s := harness.Sample(d.PID, 250*time.Millisecond)
	time.Sleep(time.Duration(nScans) * period)
	w := s.Stop()
	profiled()
	fig["requests_per_scan"] = float64(proxy.requests.Load()-req1) / float64(nScans)
	fig["pymodbus_cpu_s_daemon"] = procCPU(t, srv.pid) - py0
	fig["cpu_s"] = w.TreeCPU
	fig["daemon_cpu_s"] = w.RootCPU
	fig["rss_mib"] = w.RootHWM
	fig["tree_rss_mib"] = w.PeakTreeRSS
	fig["ready_ms"] = float64(d.Ready.Microseconds()) / 1000
}
