package daemon

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

var quiet = slog.New(slog.DiscardHandler)

// TestLifecycle_StartFailureStopsTheStartedInReverse: when a part fails to
// start, the parts started before it (in this and earlier calls) stop in
// reverse order, the failed one and those after it never stop, the error
// names the part, and a later stop stops nothing twice.
func TestLifecycle_StartFailureStopsTheStartedInReverse(t *testing.T) {
	var log []string
	p := func(name string, fail bool) part {
		return part{name: name,
			start: func(context.Context) error {
				log = append(log, "start "+name)
				if fail {
					return errors.New("port in use")
				}
				return nil
			},
			stop: func(context.Context) error { log = append(log, "stop "+name); return nil }}
	}
	l := lifecycle{log: quiet}
	ctx := context.Background()
	if err := l.start(ctx, p("store", false), p("service", false)); err != nil {
		t.Fatal(err)
	}
	err := l.start(ctx, p("engine", false), p("listener", true), p("api", false))
	if err == nil || !strings.Contains(err.Error(), "start listener: port in use") {
		t.Fatalf("err = %v", err)
	}
	want := []string{"start store", "start service", "start engine", "start listener",
		"stop engine", "stop service", "stop store"}
	if !slices.Equal(log, want) {
		t.Fatalf("order\n got %v\nwant %v", log, want)
	}
	l.stop(ctx)
	if !slices.Equal(log, want) {
		t.Fatalf("a second stop stopped again: %v", log)
	}
}

// TestLifecycle_StopInReverseOnceEachAndOnAStopError: stop runs every
// started part's stop in reverse even when one fails, and only once.
func TestLifecycle_StopInReverseOnceEachAndOnAStopError(t *testing.T) {
	var log []string
	mk := func(name string, stopErr error) part {
		return part{name: name, start: func(context.Context) error { return nil },
			stop: func(context.Context) error { log = append(log, name); return stopErr }}
	}
	l := lifecycle{log: quiet}
	if err := l.start(context.Background(), mk("a", nil), part{name: "b", start: func(context.Context) error { return nil }},
		mk("c", errors.New("boom")), mk("d", nil)); err != nil {
		t.Fatal(err)
	}
	l.stop(context.Background())
	l.stop(context.Background())
	if !slices.Equal(log, []string{"d", "c", "a"}) {
		t.Fatalf("stopped %v, want d, c, a", log)
	}
}
