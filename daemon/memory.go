package daemon

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"qubiq.dev/edge/config"
	"qubiq.dev/edge/internal/exepages"
)

// The daemon's soft memory limit (memory.limit, docs/config.md): the Go
// runtime collects sooner, and gives freed memory back to the system
// sooner, as the memory it holds nears the limit. It is soft: the runtime
// lets the heap grow past it rather than collect without end (it spends at
// most about half of a core on that), so it never fails an allocation.

// memoryFloor is the least the auto limit sets.
const memoryFloor = 16 << 20

// memoryEvery is how often auto follows the live heap.
const memoryEvery = 2 * time.Second

// memoryMetrics are the runtime's figures auto reads.
var memoryMetrics = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

// autoLimit returns the auto limit for the runtime's figures now (in the
// order of memoryMetrics): half again the live heap, plus what the runtime
// holds besides the heap (stacks, its own metadata), at least memoryFloor.
// Collections then come when the heap has grown by half since the last
// (GOGC's default waits for it to double), and the memory above that is
// returned to the system.
func autoLimit(live, total, objects, unused, free, released int64) int64 {
	other := total - objects - unused - free - released
	return max(live+live/2+max(other, 0), memoryFloor)
}

// memoryWarnings: GOMEMLIMIT in the environment wins over memory.limit.
func memoryWarnings(*config.Daemon) []string {
	if os.Getenv("GOMEMLIMIT") != "" {
		return []string{"memory.limit: GOMEMLIMIT is set in the environment and sets the limit; memory.limit is not acted on"}
	}
	return nil
}

// startMemoryLimit applies memory.limit: a size once, auto from now on
// every memoryEvery until ctx ends; nothing when it is unlimited or when
// GOMEMLIMIT is set in the environment (the runtime applied that itself).
func (s *System) startMemoryLimit(ctx context.Context) {
	lim := s.cfg.Memory.LimitBytes
	switch {
	case os.Getenv("GOMEMLIMIT") != "" || lim == 0:
		return
	case lim > 0:
		debug.SetMemoryLimit(lim)
		return
	}
	samples := make([]metrics.Sample, len(memoryMetrics))
	for i, name := range memoryMetrics {
		samples[i].Name = name
	}
	apply := func() int64 {
		metrics.Read(samples)
		for _, x := range samples {
			if x.Value.Kind() != metrics.KindUint64 {
				return 0 // not this runtime's figures: leave the limit alone
			}
		}
		v := func(i int) int64 { return int64(samples[i].Value.Uint64()) }
		l := autoLimit(v(0), v(1), v(2), v(3), v(4), v(5))
		debug.SetMemoryLimit(l)
		return l
	}
	s.log.Debug("memory limit: auto", slog.Int64("bytes", apply()))
	go func() {
		t := time.NewTicker(memoryEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				apply()
			}
		}
	}()
}

// settleAfter is how long after the sandbox's workers are up (or have
// failed) the daemon gives back what only its start-up used: past the
// start-up, the first scans and the first requests.
const settleAfter = 3 * time.Second

// startSettle gives back, settleAfter past the sandbox's warm-up, what
// only the start-up needed: the running project's decoded tags (the
// service keeps the figures it answers from, and decodes them again from
// the store for an import or export), then, under memory.exe_pages:
// release (docs/config.md), the executable's pages the start-up touched
// (package exepages): only those the daemon keeps using fault back in. A
// failure changes nothing but the figure and is logged at debug.
func (s *System) startSettle(ctx context.Context) {
	go func() {
		select {
		case <-s.svc.Warmed():
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(settleAfter)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		s.svc.ReleaseTags()
		if s.cfg.Memory.ExePages == config.ExePagesKeep {
			return
		}
		n, err := exepages.Release()
		if err != nil {
			s.log.Debug("executable pages: not released", slog.Any("err", err), slog.Int64("bytes", n))
			return
		}
		s.log.Debug("executable pages released", slog.Int64("bytes", n))
	}()
}
