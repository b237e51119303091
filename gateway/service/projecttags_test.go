package service

import (
	"context"
	"reflect"
	"slices"
	"testing"
)

const releaseProject = `
devices:
  - {name: a, driver: sim}
  - {name: b, driver: sim}
tags:
  - {path: L/One, device: a, address: memory, type: float64, scan: 1s, units: bar}
  - {path: L/Two, device: a, address: memory, type: int16}
  - {path: L/Three, device: b, address: "sine(0,10,20s)", type: float64, scan: 5s, history: {enabled: true}}
`

// TestReleaseTags_FiguresKeptTagsDecodedAgain: once the running project's
// tags are released, the service holds none, yet Project returns the same
// tags (decoded again from the store), and the tag count, the devices'
// tag counts, the scan periods and a tag export answer as before.
func TestReleaseTags_FiguresKeptTagsDecodedAgain(t *testing.T) {
	ctx := context.Background()
	s := newService(t, withStoredProject(t, testOptions(t, t.TempDir()), releaseProject))
	before := s.Project().Tags
	devs := s.ListDevices(ctx)
	csv, err := s.ExportTags(ctx, "csv")
	if err != nil {
		t.Fatal(err)
	}
	s.ReleaseTags()
	if s.running().Tags != nil {
		t.Fatalf("the running project still holds %d tags", len(s.running().Tags))
	}
	if got := s.Project().Tags; !reflect.DeepEqual(got, before) {
		t.Errorf("Project().Tags after release = %+v, want %+v", got, before)
	}
	if n := s.TagCount(); n != 3 {
		t.Errorf("TagCount = %d, want 3", n)
	}
	if got := s.TagScans(); !slices.Equal(got, []string{"1s", "", "5s"}) {
		t.Errorf("TagScans = %q, want 1s, (none), 5s", got)
	}
	if got := s.ListDevices(ctx); !reflect.DeepEqual(got, devs) || got[0].Tags != 2 || got[1].Tags != 1 {
		t.Errorf("ListDevices after release = %+v, want %+v (2 and 1 tags)", got, devs)
	}
	if got, err := s.ExportTags(ctx, "csv"); err != nil || string(got) != string(csv) {
		t.Errorf("ExportTags after release: %v\n%s\nwant\n%s", err, got, csv)
	}
	s.ReleaseTags() // twice: nothing more
	if got := s.Project().Tags; !reflect.DeepEqual(got, before) {
		t.Errorf("after a second release: %+v", got)
	}
}

// TestReleaseTags_AnImportReleasesTheNewProjects: a project import after
// the release runs against the previous tags (decoded again) and leaves
// the new project running with its tags released and its figures.
func TestReleaseTags_AnImportReleasesTheNewProjects(t *testing.T) {
	ctx := context.Background()
	s := newService(t, withStoredProject(t, testOptions(t, t.TempDir()), releaseProject))
	s.ReleaseTags()
	next := releaseProject + "  - {path: L/Four, device: b, address: memory, type: float64, scan: 2s}\n"
	d, err := s.ImportProject(ctx, designer, []byte(next))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Tags.Added, []string{"L/Four"}) || len(d.Tags.Changed)+len(d.Tags.Removed) != 0 {
		t.Errorf("changes %+v, want L/Four added only", d.Tags)
	}
	if s.running().Tags != nil {
		t.Error("the imported project's tags are held after the import")
	}
	tags := s.Project().Tags
	if len(tags) != 4 || tags[3].Path != "L/Four" || s.TagCount() != 4 {
		t.Errorf("after the import: %d tags (%+v), TagCount %d; want 4", len(tags), tags, s.TagCount())
	}
	if got := s.ListDevices(ctx); got[1].Tags != 2 {
		t.Errorf("device b: %d tags, want 2", got[1].Tags)
	}
}

// TestReleaseTags_NoStoredDocumentKeepsThem: without a stored document to
// decode them from again, the tags stay.
func TestReleaseTags_NoStoredDocumentKeepsThem(t *testing.T) {
	s := newService(t, testOptions(t, t.TempDir()))
	s.ReleaseTags()
	if s.TagCount() != 0 || s.Project() == nil {
		t.Errorf("an empty project: count %d, project %v", s.TagCount(), s.Project())
	}
}
