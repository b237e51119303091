package service

import (
	"log/slog"

	"qubiq.dev/edge/config"
)

// The running project's tags once the daemon has started. The decoded
// tags (config.TagConfig, a few hundred bytes each) are needed to build
// the tag engine, the alarms, the flows' checks and the API's panels, and
// then only by project and tag imports and exports. ReleaseTags drops
// them from the running project; what the service answers in steady
// state from them (how many tags, per device, their scan periods) is kept
// in runningProject, and Project decodes them again from the stored
// document for the rare caller that wants them all.

// runningProject is the running project with the figures of its tags; p
// and the figures change together (one pointer).
type runningProject struct {
	p         *config.Project
	released  bool           // p.Tags dropped (ReleaseTags): Project decodes them again
	count     int            // tags
	perDevice map[string]int // tags by device name
	scans     []string       // the distinct scan values of the tags ("" for absent)
}

// setProject makes p the running project, with its tags.
func (s *Service) setProject(p *config.Project) {
	rp := &runningProject{p: p, count: len(p.Tags), perDevice: map[string]int{}}
	seen := map[string]bool{}
	for _, t := range p.Tags {
		rp.perDevice[t.Device]++
		if !seen[t.Scan] {
			seen[t.Scan] = true
			rp.scans = append(rp.scans, t.Scan)
		}
	}
	s.project.Store(rp)
}

// running returns the running project as it is held: its Tags are nil
// once released. For what needs anything but the tags.
func (s *Service) running() *config.Project {
	if rp := s.project.Load(); rp != nil {
		return rp.p
	}
	return nil
}

// ReleaseTags drops the decoded tags from the running project (the daemon
// calls it once started: they are ~250 bytes a tag of heap, plus their
// strings, for the daemon's life). Project still returns them, decoded
// again from the store; TagCount, Alive, ListDevices and TagScans use the
// figures kept. An import releases the new project's tags once applied.
func (s *Service) ReleaseTags() {
	s.applyMu.Lock() // not during an import
	defer s.applyMu.Unlock()
	s.releaseTags()
}

// releaseTags is ReleaseTags with applyMu held.
func (s *Service) releaseTags() {
	rp := s.project.Load()
	if rp == nil || rp.released || rp.count == 0 {
		return
	}
	if doc, err := s.projectDoc(); err != nil || doc == nil {
		return // nothing to decode them from again: keep them
	}
	p := *rp.p
	p.Tags = nil
	next := *rp
	next.p, next.released = &p, true
	s.project.Store(&next)
}

// Project returns the running project (never changed; an import replaces
// it), its tags included: once released, decoded again from the stored
// document (a fresh copy at each call).
func (s *Service) Project() *config.Project {
	rp := s.project.Load()
	if rp == nil {
		return nil
	}
	if !rp.released {
		return rp.p
	}
	doc, err := s.projectDoc()
	var q *config.Project
	if err == nil && doc != nil {
		q, err = config.ParseProject(doc)
	}
	if q == nil || len(q.Tags) != rp.count {
		s.log.Error("running project: its tags could not be decoded again from the store", slog.Any("err", err))
		return rp.p
	}
	p := *rp.p
	p.Tags = q.Tags
	return &p
}

// TagCount is the number of tags of the running project.
func (s *Service) TagCount() int {
	if rp := s.project.Load(); rp != nil {
		return rp.count
	}
	return 0
}

// TagScans returns the distinct scan values of the running project's tags
// as written ("" for a tag without one), in the order first seen.
func (s *Service) TagScans() []string {
	if rp := s.project.Load(); rp != nil {
		return rp.scans
	}
	return nil
}
