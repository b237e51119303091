package service

import (
	"log/slog"
	"slices"
	"sync"
)

// warnings are the health warnings: what the configuration asks for that
// the daemon does not act on, and safeties turned off (docs/config.md,
// "Warnings"). Any part adds to them through Warn; they never make the
// health degraded and are never silent.
type warnings struct {
	mu   sync.Mutex
	list []string
}

// Warn adds a health warning (once: the same text twice is one warning)
// and logs it at start-up level Warn, so it shows in the log and in
// GET /api/v1/health "warnings".
func (s *Service) Warn(text string) {
	s.warns.mu.Lock()
	dup := slices.Contains(s.warns.list, text)
	if !dup {
		s.warns.list = append(s.warns.list, text)
	}
	s.warns.mu.Unlock()
	if !dup {
		s.log.Warn(text, slog.String("health", "warning"))
	}
}

// Warnings returns the health warnings in the order they were added.
func (s *Service) Warnings() []string {
	s.warns.mu.Lock()
	defer s.warns.mu.Unlock()
	return slices.Clone(s.warns.list)
}
