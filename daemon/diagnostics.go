package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/gateway"
	"qubiq.dev/edge/metrics"
)

// diagnostics are the metrics and the diagnostics listener of a System.
type diagnostics struct {
	metrics *metrics.Metrics
	stop    func(context.Context) error // ends the listener; nil when none runs
}

// buildMetrics builds the metrics over the service layer and the flows
// (docs/metrics.md); the API and the diagnostics listener serve them.
func (s *System) buildMetrics(context.Context) error {
	flows := s.flows
	s.diag.metrics = metrics.New(metrics.Config{
		Diagnostics: s.svc,
		Health:      s.svc,
		Version:     Version,
		Flows: func(ctx context.Context) []gateway.FlowStatus {
			if flows == nil {
				return nil
			}
			fs, err := flows.ListFlows(ctx, auth.Full("metrics", auth.RealmPlatform, "metrics"))
			if err != nil {
				s.log.Debug("metrics: flows not listed", slog.Any("err", err))
			}
			return fs
		},
	})
	return nil
}

// startDiagnostics binds the diagnostics listener (diagnostics.listen;
// "off": none) and serves the metrics there, with net/http/pprof when
// diagnostics.pprof is true (loopback only: the config refuses it
// elsewhere). An address written in the config that cannot be bound
// stops the start; the default's failure (another qubiqd holds the port)
// is a health warning.
func (s *System) startDiagnostics(ctx context.Context) error {
	dg := s.cfg.Diagnostics
	if dg.Listen == "off" {
		return nil
	}
	ln, err := net.Listen("tcp", dg.Listen)
	if err != nil {
		if dg.Explicit {
			return fmt.Errorf("diagnostics.listen %s: %w (set by the config or QUBIQ_DIAGNOSTICS_LISTEN: free the port, or choose another address or off)", dg.Listen, err)
		}
		s.svc.Warn(fmt.Sprintf("diagnostics listener not served: the default address %s cannot be bound (%v); set diagnostics.listen to another address, or off",
			dg.Listen, err))
		return nil
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	s.diag.stop = func(context.Context) error {
		cancel()
		return <-done
	}
	go func() { done <- s.diag.metrics.Serve(sctx, ln, dg.Pprof) }()
	s.log.Info("diagnostics listener", slog.String("listen", ln.Addr().String()), slog.Bool("pprof", dg.Pprof))
	return nil
}

// stopDiagnostics ends the diagnostics listener, if it runs.
func (s *System) stopDiagnostics(ctx context.Context) error {
	if s.diag.stop == nil {
		return nil
	}
	err := s.diag.stop(ctx)
	s.diag.stop = nil
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
