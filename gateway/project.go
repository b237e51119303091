package gateway

import (
	"context"

	"qubiq.dev/edge/auth"
)

// Project is the running project: import and export of the whole project
// file and of its tags. An import is all or nothing: it is validated like
// qubiqd --check-config, and on any problem it returns a *ProjectError with
// every problem and its line and applies nothing; else it is applied
// without a restart (devices, tags and their history, named queries; the
// other sections at the next start), kept in the store and in the
// configured project file, and audited.
type Project interface {
	// ImportProject replaces the project with doc (the project file, YAML
	// or JSON).
	ImportProject(ctx context.Context, g auth.Grant, doc []byte) (ProjectChanges, error)
	// ExportProject returns the running project file (YAML) as imported.
	ExportProject(ctx context.Context) ([]byte, error)
	// ImportTags upserts the tags of doc (format "csv" or "yaml") into the
	// project by path; the other tags stay. A CSV row keeps the keys CSV
	// has no column for.
	ImportTags(ctx context.Context, g auth.Grant, format string, doc []byte) (ProjectChanges, error)
	// ExportTags returns the project's tags as format "csv" or "yaml"
	// (another format wraps ErrInvalid).
	ExportTags(ctx context.Context, format string) ([]byte, error)
}

// ProjectChanges is what an import changed against the running project,
// by device name and tag path (each list sorted), and the other sections
// that changed and apply at the next start.
type ProjectChanges struct {
	Devices         ChangeSet
	Tags            ChangeSet
	RestartRequired []string
}

// ChangeSet lists names added, changed and removed.
type ChangeSet struct {
	Added   []string
	Changed []string
	Removed []string
}
