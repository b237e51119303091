//go:build bench

package enginebench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"qubiq.dev/edge/bench/harness"
)

// The Node-RED stream: rounds of tags updates, the same shape as one op of
// BenchmarkEngineCeiling (10,000 tags per scan).
const (
	tags   = 10000
	rounds = 20
)

// goBench runs BenchmarkEngineCeiling on one core and returns its metrics
// by sub-benchmark ("changed", "unchanged") and unit.
func goBench(t *testing.T) map[string]map[string]float64 {
	benchtime := os.Getenv("BENCH_BENCHTIME")
	if benchtime == "" {
		benchtime = "3s"
	}
	cmd := exec.Command("taskset", "-c", "0", "go", "test", "-run", "^$", "-bench", "^BenchmarkEngineCeiling$", "-benchmem",
		"-cpu", "1", "-benchtime", benchtime, "-count", "1", "./tagengine")
	cmd.Dir = harness.RepoRoot()
	out, err := cmd.CombinedOutput()
	os.Stderr.Write(out)
	if err != nil {
		t.Fatalf("go test -bench: %v", err)
	}
	res := map[string]map[string]float64{}
	re := regexp.MustCompile(`^BenchmarkEngineCeiling/(\w+)\s+\d+\s+(.*)$`)
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		m := re.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		fs := strings.Fields(m[2])
		res[m[1]] = map[string]float64{}
		for i := 0; i+1 < len(fs); i += 2 {
			v, _ := strconv.ParseFloat(fs[i], 64)
			res[m[1]][fs[i+1]] = v
		}
	}
	if res["changed"] == nil || res["unchanged"] == nil {
		t.Fatalf("no results of BenchmarkEngineCeiling in:\n%s", out)
	}
	return res
}

// noderedFlows: node ids are prefixed (b3_): Node-RED takes any string
// property equal to a node's id (the RBE node's "func": "rbe") for a
// reference to that node. An inject starts gen_changed (every update a new value, so
// RBE passes all); at its END the consumer starts gen_unchanged (every
// value repeats the last, so RBE drops all); at that END it reports.
func noderedFlows() []map[string]any {
	gen := func(changing bool) string {
		v := "i"
		if changing {
			v = "i + ((r + 1) % 2) * 0.5"
		}
		return fmt.Sprintf(`const N = %d, R = %d;
flow.set('t0', Date.now());
for (let r = 0; r < R; r++) { for (let i = 0; i < N; i++) { node.send({topic: 'T' + i, payload: %s}); } }
node.send({topic: 'END', payload: Date.now()});
return null;`, tags, rounds, v)
	}
	count := `if (msg.topic === 'END') {
  const phase = (context.phase || 0) + 1; context.phase = phase;
  node.warn('BENCH_DONE phase=' + phase + ' ms=' + (Date.now() - flow.get('t0')) + ' n=' + (context.n || 0));
  context.n = 0;
  return phase === 1 ? {payload: 'next'} : null;
}
context.n = (context.n || 0) + 1;
return null;`
	// The first round of the unchanged phase carries the values of the
	// changed phase's last round (r = 19: i + 0): RBE drops them all.
	return []map[string]any{
		{"id": "b3_tab", "type": "tab", "label": "engine"},
		{"id": "b3_start", "type": "inject", "z": "b3_tab", "name": "begin", "props": []map[string]string{{"p": "payload"}},
			"repeat": "", "once": true, "onceDelay": "2", "topic": "", "payload": "", "payloadType": "date", "wires": [][]string{{"b3_gen_changed"}}},
		{"id": "b3_gen_changed", "type": "function", "z": "b3_tab", "name": "gen changed", "outputs": 1, "func": gen(true), "wires": [][]string{{"b3_rbe"}}},
		{"id": "b3_gen_unchanged", "type": "function", "z": "b3_tab", "name": "gen unchanged", "outputs": 1, "func": gen(false), "wires": [][]string{{"b3_rbe"}}},
		{"id": "b3_rbe", "type": "rbe", "z": "b3_tab", "name": "report by exception", "func": "rbe", "gap": "", "start": "", "inout": "out",
			"septopics": true, "property": "payload", "topi": "topic", "wires": [][]string{{"b3_consume"}}},
		{"id": "b3_consume", "type": "function", "z": "b3_tab", "name": "consume", "outputs": 1, "func": count, "wires": [][]string{{"b3_gen_unchanged"}}},
	}
}

// nodered returns the ms of each phase and the messages the consumer got.
func nodered(t *testing.T) (changedMS, unchangedMS float64, changedN, unchangedN int) {
	n := harness.StartNodeRED(t, noderedFlows())
	defer n.Stop()
	re := regexp.MustCompile(`BENCH_DONE phase=(\d) ms=(\d+) n=(\d+)`)
	deadline := time.Now().Add(180 * time.Second)
	for time.Now().Before(deadline) {
		exited := n.Exited() // read the log after: what it wrote before exiting counts
		b, _ := os.ReadFile(n.Log)
		ms := re.FindAllStringSubmatch(string(b), -1)
		if len(ms) >= 2 {
			changedMS, _ = strconv.ParseFloat(ms[0][2], 64)
			unchangedMS, _ = strconv.ParseFloat(ms[1][2], 64)
			changedN, _ = strconv.Atoi(ms[0][3])
			unchangedN, _ = strconv.Atoi(ms[1][3])
			return
		}
		if exited != nil {
			t.Fatal(exited)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := os.ReadFile(n.Log)
	t.Fatalf("Node-RED did not finish in 180 s; its log:\n%s", b)
	return
}

// TestBenchEngine: see the package comment and bench/README.md.
func TestBenchEngine(t *testing.T) {
	harness.NodeREDDir(t)
	g := goBench(t)
	cMS, uMS, cN, uN := nodered(t)
	updates := float64(tags * rounds)
	if cN != tags*rounds || uN != 0 {
		t.Errorf("Node-RED's consumer got %d changed (want %d) and %d unchanged (want 0): RBE is not filtering as configured", cN, tags*rounds, uN)
	}
	redC, redU := cMS*1e6/updates, uMS*1e6/updates // ns per update
	var f, detail harness.Figures
	f.Set("updates_per_s", g["changed"]["updates/s"])
	f.Set("ns_per_update", g["changed"]["ns/update"])
	f.Set("allocs_per_update", g["changed"]["allocs/update"])
	f.Set("unchanged_updates_per_s", g["unchanged"]["updates/s"])
	f.Set("unchanged_allocs_per_update", g["unchanged"]["allocs/update"])
	f.Set("nodered_updates_per_s", 1e9/redC)
	f.Set("nodered_unchanged_updates_per_s", 1e9/redU)
	f.Set("ratio", g["changed"]["ns/update"]/redC)
	detail.Set("unchanged_ns_per_update", g["unchanged"]["ns/update"])
	detail.Set("nodered_ns_per_update", redC)
	detail.Set("nodered_unchanged_ns_per_update", redU)
	detail.Set("unchanged_ratio", g["unchanged"]["ns/update"]/redU)
	detail.Print("bench-engine-detail")
	f.Print("bench-engine")
}
