package daemon

import (
	"strings"
	"testing"

	"qubiq.dev/edge/config"
)

// TestAutoLimit_HalfAgainTheLiveHeapPlusTheRest: auto is the live heap and
// half again, plus what the runtime holds besides the heap, never below
// the floor.
func TestAutoLimit_HalfAgainTheLiveHeapPlusTheRest(t *testing.T) {
	const mib = 1 << 20
	// live 40 MiB; total 100 = heap 90 (objects 50, unused 5, free 10, released 25) + 10 besides
	if got := autoLimit(40*mib, 100*mib, 50*mib, 5*mib, 10*mib, 25*mib); got != 70*mib {
		t.Errorf("auto limit %d MiB, want 40 + 20 + 10 = 70", got/mib)
	}
	if got := autoLimit(2*mib, 8*mib, 3*mib, 1*mib, 1*mib, 1*mib); got != memoryFloor {
		t.Errorf("a small heap: %d MiB, want the floor", got/mib)
	}
}

// TestMemoryLimit_Config: memory.limit is auto by default, unlimited, or a
// size of at least 16 MiB; anything else is refused naming the key.
func TestMemoryLimit_Config(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want int64
		err  string
	}{
		{"", config.MemoryAuto, ""},
		{"memory: {limit: auto}\n", config.MemoryAuto, ""},
		{"memory: {limit: unlimited}\n", 0, ""},
		{"memory: {limit: 48MiB}\n", 48 << 20, ""},
		{"memory: {limit: 1MiB}\n", 0, "memory.limit: 1MiB is below 16 MiB"},
		{"memory: {limit: lots}\n", 0, "memory.limit: bad size"},
	} {
		c, err := loadConfigErr(t, tt.yaml)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %v, want an error naming %q", tt.yaml, err, tt.err)
			}
			continue
		}
		if err != nil || c.Memory.LimitBytes != tt.want {
			t.Errorf("%q: %v %+v, want %d", tt.yaml, err, c, tt.want)
		}
	}
}

// TestExePages_Config: memory.exe_pages is release by default, or keep;
// anything else is refused naming the key.
func TestExePages_Config(t *testing.T) {
	for _, tt := range []struct {
		yaml, want, err string
	}{
		{"", config.ExePagesRelease, ""},
		{"memory: {exe_pages: release}\n", config.ExePagesRelease, ""},
		{"memory: {exe_pages: Keep}\n", config.ExePagesKeep, ""},
		{"memory: {exe_pages: drop}\n", "", `memory.exe_pages: "drop" is neither release nor keep`},
	} {
		c, err := loadConfigErr(t, tt.yaml)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %v, want an error naming %q", tt.yaml, err, tt.err)
			}
			continue
		}
		if err != nil || c.Memory.ExePages != tt.want {
			t.Errorf("%q: %v %+v, want %q", tt.yaml, err, c.Memory, tt.want)
		}
	}
}
