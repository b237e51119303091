package harness

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Median returns the median of vs (the lower middle of an even count), 0
// for none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// Percentile returns the nearest-rank percentile p (0..1) of vs.
func Percentile(vs []float64, p float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	i := int(math.Ceil(float64(len(s))*p)) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Figures are one benchmark's named figures, printed in the order of their
// keys.
type Figures struct {
	keys []string
	vals map[string]string
}

// Set sets key to v, formatted with the fewest digits that keep three
// significant ones (integers as integers).
func (f *Figures) Set(key string, v float64) {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if v != math.Trunc(v) || math.Abs(v) >= 1e15 {
		s = strconv.FormatFloat(v, 'g', 3, 64)
		if strings.Contains(s, "e") {
			s = strconv.FormatFloat(v, 'f', 1, 64)
		}
		if a := math.Abs(v); a >= 100 {
			s = strconv.FormatFloat(v, 'f', 1, 64)
		} else if a >= 1 {
			s = strconv.FormatFloat(v, 'f', 2, 64)
		}
	}
	f.SetString(key, s)
}

// SetString sets key to the text s (no spaces).
func (f *Figures) SetString(key, s string) {
	if f.vals == nil {
		f.vals = map[string]string{}
	}
	if _, ok := f.vals[key]; !ok {
		f.keys = append(f.keys, key)
	}
	f.vals[key] = strings.ReplaceAll(s, " ", "_")
}

// Get returns the text of key.
func (f *Figures) Get(key string) string { return f.vals[key] }

// String is "k=v k=v ..." in the order the keys were first set.
func (f *Figures) String() string {
	var b strings.Builder
	for i, k := range f.keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", k, f.vals[k])
	}
	return b.String()
}

// Print writes "NAME: k=v ..." to stdout, where run.sh picks the last
// such line as the benchmark's result (bench/README.md).
func (f *Figures) Print(name string) {
	os.Stdout.WriteString(name + ": " + f.String() + "\n")
}
