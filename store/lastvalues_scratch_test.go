package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

// checkLastValues fails t unless db's last values are exactly model.
func checkLastValues(t *testing.T, db *DB, model map[string]value.VQT, when string) {
	t.Helper()
	got, err := db.LoadLastValues()
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if len(got) != len(model) {
		t.Fatalf("%s: %d stored, want %d", when, len(got), len(model))
	}
	for p, want := range model {
		if have, ok := got[p]; !ok || !sameVQT(have, want) {
			t.Fatalf("%s: %s = %+v (stored %v), want %+v", when, p, have, ok, want)
		}
	}
}

// randomVQT is a VQT of a random kind; strings of random length make the
// segments' sizes change from save to save.
func randomVQT(rng *rand.Rand, round int) value.VQT {
	var v value.Value
	switch rng.IntN(5) {
	case 0:
		v = rng.Float64()
	case 1:
		v = rng.Int64()
	case 2:
		v = strings.Repeat("s", rng.IntN(300))
	case 3:
		v = []any{int64(round), "x"} // a JSON record
	default:
		v = rng.IntN(2) == 0
	}
	return value.VQT{Value: v, Quality: value.Quality(rng.IntN(3)), Time: time.Unix(int64(1e9+round), int64(rng.IntN(1e9))).UTC()}
}

// TestLastValues_ScratchReusedSaveAfterSave saves, changes and deletes
// values round after round, all through the DB's one kept scratch, and
// checks after each round that the store holds exactly the values last
// saved: no record of a save is overwritten by the next one reusing the
// buffers, including a segment larger than a chunk.
func TestLastValues_ScratchReusedSaveAfterSave(t *testing.T) {
	db := openTest(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 6000
	all := make([]string, n)
	for i := range all {
		all[i] = fmt.Sprintf("area%d/tag%05d", i%7, i)
	}
	slices.Sort(all)
	model := map[string]value.VQT{}
	var kept *lvScratch
	for round := 0; round < 40; round++ {
		var paths []string
		for _, p := range all {
			if round%5 == 0 || rng.IntN(10) < 3 {
				paths = append(paths, p)
			}
		}
		vals := make([]value.VQT, len(paths))
		for i, p := range paths {
			vals[i] = randomVQT(rng, round)
			model[p] = vals[i]
		}
		if round == 7 { // a record over lvChunkSize: a buffer of its own
			vals[0].Value = strings.Repeat("big", lvChunkSize/2)
			model[paths[0]] = vals[0]
		}
		if err := db.PutLastValues(paths, vals); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if round%3 == 1 {
			var del []string
			for i := 0; i < 300; i++ {
				p := all[rng.IntN(n)]
				del = append(del, p, p+"/never-saved")
				delete(model, p)
			}
			if err := db.DeleteLastValues(del...); err != nil {
				t.Fatalf("round %d: delete: %v", round, err)
			}
		}
		checkLastValues(t, db, model, fmt.Sprintf("round %d", round))
		s := db.lvScratch.p.Load()
		if s == nil || (kept != nil && s != kept) {
			t.Fatalf("round %d: scratch %p, want the one kept since the first save (%p)", round, s, kept)
		}
		kept = s
	}
}

// TestLastValues_ScratchDroppedPastItsBound: a save whose buffers grew
// past lvScratchMax stores its values and leaves no scratch behind; the
// next save makes and keeps a small one.
func TestLastValues_ScratchDroppedPastItsBound(t *testing.T) {
	db := openTest(t)
	t0 := time.Unix(1e9, 0).UTC()
	big := map[string]value.VQT{}
	for i := 0; i < 3; i++ {
		big[fmt.Sprintf("big%d", i)] = value.VQT{Value: strings.Repeat(string(rune('a'+i)), lvScratchMax/2), Quality: value.Good, Time: t0}
	}
	if err := db.SaveLastValues(big); err != nil {
		t.Fatal(err)
	}
	if s := db.lvScratch.p.Load(); s != nil {
		t.Fatalf("a scratch of %d bytes kept, over the bound of %d", s.retained(), lvScratchMax)
	}
	checkLastValues(t, db, big, "after the outsized save")
	small := map[string]value.VQT{"x": {Value: 1.5, Quality: value.Good, Time: t0}}
	if err := db.SaveLastValues(small); err != nil {
		t.Fatal(err)
	}
	s := db.lvScratch.p.Load()
	if s == nil || s.retained() > lvChunkSize+1<<10 {
		t.Fatalf("after a save of one tag: scratch %v, want one of about a chunk", s)
	}
	big["x"] = small["x"]
	checkLastValues(t, db, big, "after the small save")
}

// TestLastValues_ConcurrentSavesDoNotShareAScratch: two goroutines save
// their own tags and a third saves and deletes its own, all at once;
// each finds its tags as it last left them after every step, and the
// store holds exactly the last values at the end. Run with -race: two
// saves sharing one scratch would write the same buffers.
func TestLastValues_ConcurrentSavesDoNotShareAScratch(t *testing.T) {
	db := openTest(t)
	const n, rounds = 3000, 20
	set := func(prefix string) []string {
		ps := make([]string, n)
		for i := range ps {
			ps[i] = fmt.Sprintf("%s/tag%05d", prefix, i)
		}
		return ps
	}
	final := make([]map[string]value.VQT, 3)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g, prefix := range []string{"a", "b", "c"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths := set(prefix)
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			<-start
			mine := map[string]value.VQT{}
			for round := 0; round < rounds; round++ {
				if prefix == "c" && round%2 == 1 {
					if err := db.DeleteLastValues(paths...); err != nil {
						t.Errorf("%s round %d: delete: %v", prefix, round, err)
						return
					}
					clear(mine)
				} else {
					vals := make([]value.VQT, n)
					for i, p := range paths {
						vals[i] = randomVQT(rng, round)
						mine[p] = vals[i]
					}
					if err := db.PutLastValues(paths, vals); err != nil {
						t.Errorf("%s round %d: %v", prefix, round, err)
						return
					}
				}
				got, err := db.LoadLastValues()
				if err != nil {
					t.Errorf("%s round %d: load: %v", prefix, round, err)
					return
				}
				for i, p := range paths {
					have, ok := got[p]
					if want, saved := mine[p]; ok != saved || (ok && !sameVQT(have, want)) {
						t.Errorf("%s round %d: tag %d = %+v (stored %v), want %+v (saved %v)", prefix, round, i, have, ok, want, saved)
						return
					}
				}
			}
			final[g] = mine
		}()
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	model := map[string]value.VQT{}
	for _, m := range final {
		for p, v := range m {
			model[p] = v
		}
	}
	if len(final[2]) != 0 {
		t.Fatalf("c ended with %d tags, want none (its last round deletes)", len(final[2]))
	}
	checkLastValues(t, db, model, "at the end")
}
