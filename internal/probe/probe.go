// Package probe is the change probe, a debugging aid for benchmarks
// (bench/opcua): when QUBIQ_DEBUG_CHANGES_FILE names a file, qubiqd counts
// every change the tag engine publishes and the latency from each Good
// change's source timestamp to the engine, and writes a Stats document to
// the file every Every (renamed into place) and when it stops. Unset (the
// default), nothing runs. The daemon starts it; benchmarks read its file.
// It imports gateway and the standard library.
package probe

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"qubiq.dev/edge/gateway"
)

// Env names the file of the change probe.
const Env = "QUBIQ_DEBUG_CHANGES_FILE"

// Every is how often the probe rewrites its file.
const Every = 500 * time.Millisecond

// Stats is the probe's document: counts since start, and a histogram of
// the latency of Good changes (engine time minus source timestamp) by
// Bucket index.
type Stats struct {
	Changes  uint64            `json:"changes"`  // every change published
	Good     uint64            `json:"good"`     // changes with quality Good
	Dropped  uint64            `json:"dropped"`  // changes the probe's queue lost (never expected)
	Negative uint64            `json:"negative"` // Good changes whose source time is after the engine's clock
	Latency  map[string]uint64 `json:"latency"`  // Bucket index → count
}

// Bucket is the histogram bucket of latency d: 50 µs wide below 1 s
// (0..19999), then 1 ms wide up to 60 s (20000..78999), then 79000.
func Bucket(d time.Duration) int {
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

// BucketUpper is the upper bound of bucket b (Bucket's inverse).
func BucketUpper(b int) time.Duration {
	if b < 20000 {
		return time.Duration(b+1) * 50 * time.Microsecond
	}
	return time.Second + time.Duration(b-20000+1)*time.Millisecond
}

// Subscribe delivers the engine's changes into a channel of buf (as
// gateway.Tags.SubscribeValues does), with the count of those lost and a
// cancel.
type Subscribe func(buf int) (ch <-chan gateway.TagValue, dropped func() uint64, cancel func())

// Start runs the probe into file until ctx ends, when file is not empty
// (the value of Env): it subscribes with subscribe and writes the file
// every Every and at the end. It returns at once.
func Start(ctx context.Context, file string, subscribe Subscribe, log *slog.Logger) {
	if file == "" {
		return
	}
	ch, dropped, cancel := subscribe(1 << 16)
	log.Warn("debug change probe on: counting tag changes for a benchmark", slog.String("file", file))
	go func() {
		defer cancel()
		st := Stats{Latency: map[string]uint64{}}
		hist := map[int]uint64{}
		t := time.NewTicker(Every)
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
			if err == nil { // renamed into place; no sync: a debugging aid, rewritten every Every
				tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".tmp")
				if err = os.WriteFile(tmp, b, 0o644); err == nil {
					err = os.Rename(tmp, file)
				}
			}
			if err != nil {
				log.Error("debug change probe: write failed", slog.String("file", file), slog.Any("err", err))
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
				hist[Bucket(d)]++
			}
		}
	}()
}
