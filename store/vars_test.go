package store

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func newVarsTest(t *testing.T) (*DB, *Vars) {
	t.Helper()
	db := openTest(t)
	v := NewVars(db)
	t.Cleanup(func() {
		if err := v.Close(context.Background()); err != nil {
			t.Errorf("vars close: %v", err)
		}
	})
	return db, v
}

func TestVars_SetGet_RoundTrip(t *testing.T) {
	_, v := newVarsTest(t)
	ctx := context.Background()
	tests := []struct {
		name, key, val, want string
	}{
		{"int", "a", `42`, `42`},
		{"big int stays exact", "b", `9007199254740993`, `9007199254740993`},
		{"object compacted", "c", `{ "x": [1, 2.5, "s", null, true] }`, `{"x":[1,2.5,"s",null,true]}`},
		{"string", "line1/batch", `"B-17"`, `"B-17"`},
		{"null", "n", `null`, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := v.Set(ctx, tt.key, json.RawMessage(tt.val)); err != nil {
				t.Fatal(err)
			}
			got, ok, err := v.Get(tt.key)
			if err != nil || !ok || string(got) != tt.want {
				t.Fatalf("Get(%q) = %s, %v, %v; want %s", tt.key, got, ok, err, tt.want)
			}
		})
	}
	if _, ok, err := v.Get("absent"); ok || err != nil {
		t.Fatalf("Get(absent) = %v, %v; want not found, nil", ok, err)
	}
}

func TestVars_Set_Invalid(t *testing.T) {
	_, v := newVarsTest(t)
	ctx := context.Background()
	tests := []struct{ name, key, val string }{
		{"empty key", "", `1`},
		{"long key", strings.Repeat("k", MaxVarKey+1), `1`},
		{"nul in key", "a\x00b", `1`},
		{"not json", "k", `{nope`},
		{"empty value", "k", ``},
		{"two values", "k", `1 2`},
		{"too large", "k", `"` + strings.Repeat("x", MaxVarValue) + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Set(ctx, tt.key, json.RawMessage(tt.val))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Set = %v; want ErrInvalid", err)
			}
		})
	}
	if keys, _ := v.Keys(""); len(keys) != 0 {
		t.Fatalf("refused sets stored %v", keys)
	}
}

func TestVars_Delete_ReportsExisted(t *testing.T) {
	_, v := newVarsTest(t)
	ctx := context.Background()
	if err := v.Set(ctx, "k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if ok, err := v.Delete(ctx, "k"); !ok || err != nil {
		t.Fatalf("Delete(k) = %v, %v; want true", ok, err)
	}
	if ok, err := v.Delete(ctx, "k"); ok || err != nil {
		t.Fatalf("second Delete(k) = %v, %v; want false", ok, err)
	}
	if _, ok, _ := v.Get("k"); ok {
		t.Fatal("deleted key still there")
	}
}

func TestVars_Incr_Arithmetic(t *testing.T) {
	_, v := newVarsTest(t)
	ctx := context.Background()
	tests := []struct {
		name, start, by, want string
		err                   error
	}{
		{"absent counts as zero", "", "1", "1", nil},
		{"int plus int", "41", "1", "42", nil},
		{"negative", "5", "-7", "-2", nil},
		{"float by", "1", "0.5", "1.5", nil},
		{"float stays float", "1.5", "0.5", "2.0", nil},
		{"not a number stored", `"x"`, "1", "", ErrNotNumber},
		{"overflow", "9223372036854775807", "1", "", ErrInvalid},
		{"by not a number", "1", "true", "", ErrNotNumber},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("c%d", i)
			if tt.start != "" {
				if err := v.Set(ctx, key, json.RawMessage(tt.start)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := v.Incr(ctx, key, json.Number(tt.by))
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Incr = %s, %v; want %v", got, err, tt.err)
				}
				if cur, _, _ := v.Get(key); tt.start != "" && string(cur) != tt.start {
					t.Fatalf("failed Incr changed the value to %s", cur)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("Incr = %s, %v; want %s", got, err, tt.want)
			}
			if cur, _, _ := v.Get(key); string(cur) != tt.want {
				t.Fatalf("stored %s; want %s", cur, tt.want)
			}
		})
	}
}

// TestVars_Incr_ConcurrentNoLostUpdates is the proof: incr from two
// workers 10,000 times each ends at exactly 20,000.
func TestVars_Incr_ConcurrentNoLostUpdates(t *testing.T) {
	_, v := newVarsTest(t)
	ctx := context.Background()
	const workers, each = 2, 10000
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := v.Incr(ctx, "counter", "1"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, _, err := v.Get("counter")
	if err != nil || string(got) != "20000" {
		t.Fatalf("counter = %s, %v; want exactly 20000", got, err)
	}
}

// TestVars_Set_CommittedBeforeReturn_ReopenSeesIt: a Set that returned is
// in the file (read by a new open, not from memory).
func TestVars_Set_CommittedBeforeReturn_ReopenSeesIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v := NewVars(db)
	if err := v.Set(context.Background(), "k", json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	got, ok, err := NewVars(db2).Get("k")
	if err != nil || !ok || string(got) != `{"a":1}` {
		t.Fatalf("after reopen Get = %s, %v, %v", got, ok, err)
	}
}

func TestVars_KeysList_Prefix(t *testing.T) {
	_, v := newVarsTest(t)
	ctx := context.Background()
	for _, k := range []string{"line1/a", "line1/b", "line10/a", "line2/x"} {
		if err := v.Set(ctx, k, json.RawMessage(`"`+k+`"`)); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := v.Keys("line1/")
	if err != nil || strings.Join(keys, ",") != "line1/a,line1/b" {
		t.Fatalf("Keys(line1/) = %v, %v", keys, err)
	}
	all, _ := v.Keys("")
	if len(all) != 4 {
		t.Fatalf("Keys() = %v; want 4 keys", all)
	}
	list, err := v.List("line1")
	if err != nil || len(list) != 3 || list[2].Key != "line10/a" || string(list[2].Value) != `"line10/a"` {
		t.Fatalf("List(line1) = %+v, %v", list, err)
	}
}

func TestVars_Close_RefusesLater(t *testing.T) {
	db := openTest(t)
	v := NewVars(db)
	if err := v.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := v.Set(context.Background(), "k", json.RawMessage(`1`)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after Close = %v; want ErrClosed", err)
	}
}

// Environment of the kill -9 child.
const (
	envVarsChild = "QUBIQ_STORE_VARS_KILL_CHILD"
)

// TestVars_Set_SurvivesKill9 re-executes the test binary as a child that
// sets vars in a loop and prints "SET <n>" after each Set returned; the
// parent SIGKILLs it while it runs, reopens the file and finds every var
// the child reported (docs/scripting.md, system.vars: committed before the call returns).
func TestVars_Set_SurvivesKill9(t *testing.T) {
	if path := os.Getenv(envVarsChild); path != "" {
		varsKillChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), FileName)
	cmd := exec.Command(os.Args[0], "-test.run=^TestVars_Set_SurvivesKill9$", "-test.count=1")
	cmd.Env = append(os.Environ(), envVarsChild+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	last := -1
	const killAfter = 200
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "SET %d", &n); err != nil {
			continue
		}
		last = n
		if n == killAfter {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v; want killed by SIGKILL", err)
	}
	if last != killAfter {
		t.Fatalf("child reported up to %d sets; want %d", last, killAfter)
	}
	db, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v := NewVars(db)
	defer v.Close(context.Background())
	for i := 0; i <= last; i++ {
		got, ok, err := v.Get(fmt.Sprintf("k%05d", i))
		if err != nil || !ok || string(got) != fmt.Sprint(i) {
			t.Fatalf("var k%05d after kill -9 = %s, %v, %v; want %d", i, got, ok, err, i)
		}
	}
}

// varsKillChild is the child of TestVars_Set_SurvivesKill9: it sets k00000,
// k00001, ... and prints "SET n" after each returned, until it is killed.
func varsKillChild(path string) {
	db, err := Open(path, Options{Timeout: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	v := NewVars(db)
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		if err := v.Set(context.Background(), fmt.Sprintf("k%05d", i), json.RawMessage(fmt.Sprint(i))); err != nil {
			fmt.Fprintln(os.Stderr, "child set:", err)
			os.Exit(2)
		}
		fmt.Fprintf(w, "SET %d\n", i)
		w.Flush()
	}
}
