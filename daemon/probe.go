package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ProbeEnv names the file of the change probe, a debugging aid for
// benchmarks (bench/opcua): when the variable is set, qubiqd counts every
// change the tag engine publishes and the latency from each Good change's
// source timestamp to the engine, and writes a ProbeStats JSON document to
// the file every ProbeEvery (atomically, by rename) and when it stops. Unset
// (the default), nothing runs.
const ProbeEnv = "QUBIQ_DEBUG_CHANGES_FILE"

// ProbeEvery is how often the probe rewrites its file.
const ProbeEvery = 500 * time.Millisecond

// ProbeStats is the probe's document: counts since start, and a histogram
// of the latency of Good changes (engine time minus source timestamp) by
// ProbeBucket index.
type ProbeStats struct {
	Changes  uint64            `json:"changes"`  // every change published
	Good     uint64            `json:"good"`     // changes with quality Good
	Dropped  uint64            `json:"dropped"`  // changes the probe's queue lost (never expected)
	Negative uint64            `json:"negative"` // Good changes whose source time is after the engine's clock
	Latency  map[string]uint64 `json:"latency"`  // ProbeBucket index → count
}

// ProbeBucket is the histogram bucket of latency d: 50 µs wide below 1 s
// (0..19999), then 1 ms wide up to 60 s (20000..78999), then 79000.
func ProbeBucket(d time.Duration) int {
	switch {
	case d < 0:
		return 0
	case d < time.Second:
		return int(d / (50 * time.Microsecond))
	case d < 60*time.Second:
		return 20000 + int((d-time.Second)/time.Millisecond)
	}
	return 79000
}

// ProbeBucketUpper is the upper bound of bucket b (ProbeBucket's inverse).
func ProbeBucketUpper(b int) time.Duration {
	if b < 20000 {
		return time.Duration(b+1) * 50 * time.Microsecond
	}
	return time.Second + time.Duration(b-20000+1)*time.Millisecond
}

// startChangeProbe subscribes the probe to the engine when ProbeEnv is set.
// The subscription outlives a project import (tagengine TakeOver).
func (s *System) startChangeProbe(ctx context.Context) {
	file := os.Getenv(ProbeEnv)
	if file == "" {
		return
	}
	ch, dropped, cancel := s.Engine().Subscribe(1 << 16)
	s.Log.Warn("debug change probe on: counting tag changes for a benchmark", slog.String("file", file))
	go func() {
		defer cancel()
		st := ProbeStats{Latency: map[string]uint64{}}
		hist := map[int]uint64{}
		t := time.NewTicker(ProbeEvery)
		defer t.Stop()
		written := ^uint64(0)
		write := func() {
			st.Dropped = dropped()
			if st.Changes == written {
				return
			}
			clear(st.Latency)
			for b, n := range hist {
				st.Latency[strconv.Itoa(b)] = n
			}
			b, err := json.Marshal(st)
			if err == nil {
				tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
				if err = os.WriteFile(tmp, b, 0o644); err == nil {
					err = os.Rename(tmp, file)
				}
			}
			if err != nil {
				s.Log.Error("debug change probe: write failed", slog.String("file", file), slog.Any("err", err))
				return
			}
			written = st.Changes
		}
		for {
			select {
			case <-ctx.Done():
				write()
				return
			case <-t.C:
				write()
			case c := <-ch:
				st.Changes++
				if !c.Quality.IsGood() {
					continue
				}
				st.Good++
				d := time.Since(c.Time)
				if d < 0 {
					st.Negative++
				}
				hist[ProbeBucket(d)]++
			}
		}
	}()
}
