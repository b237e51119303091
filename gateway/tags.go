package gateway

import (
	"context"
	"time"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/value"
)

// Tags is the tag engine under a grant. g's prefixes limit what it sees
// (a path outside them reads and writes as Bad_UserAccessDenied); writes
// need tag:write and, per tag, g's write level at or above the tag's.
type Tags interface {
	// ListTags returns the project's tags g may see (inside its prefixes),
	// with OPC UA ns= addresses in the nsu= form once converted.
	ListTags(ctx context.Context, g auth.Grant) []TagInfo
	// ReadTags returns one TagValue per path, in order: an unknown path
	// is Bad_NodeIdUnknown, a path outside g's prefixes (or a grant
	// without tag:read) Bad_UserAccessDenied.
	ReadTags(ctx context.Context, g auth.Grant, paths []string) []TagValue
	// WriteTags checks each write against g (scope, prefixes, the tag's
	// write level, read-only tags) and writes those allowed, returning one
	// WriteResult per write, in order (Quality Good when written). Every
	// write that reaches equipment is audited first. An error refuses the
	// whole batch and nothing was written: it wraps ErrUnavailable when
	// the caller should retry (a failed write-level lookup: REST answers
	// 503), ErrInvalid, or is an *auth.DeniedError (no tag:write).
	WriteTags(ctx context.Context, g auth.Grant, writes []TagWrite) ([]WriteResult, error)
	// BrowseTags lists the children of folder ("" the root; slashes at
	// the ends ignored) among the tags g may see: folders first (with the
	// number of tags under each), then tags, each sorted by name.
	BrowseTags(ctx context.Context, g auth.Grant, folder string) []TagNode
	// SubscribeValues delivers every change of the tags g may read (g
	// needs tag:read; its prefixes apply) into a channel of buf changes,
	// across project imports, until cancel. dropped counts the changes
	// lost because the subscriber fell behind (take a fresh ReadTags
	// then). cancel may be called more than once.
	SubscribeValues(g auth.Grant, buf int) (ch <-chan TagValue, dropped func() uint64, cancel func())
}

// TagInfo is one tag of the project: its path, device and address, value
// type, engineering units, write level, whether it is read-only, and its
// scan class (0 for tags a device pushes).
type TagInfo struct {
	Path       string
	Device     string
	Address    string
	Type       value.Type
	Units      string
	WriteLevel auth.Level
	ReadOnly   bool
	Scan       time.Duration
	// Min and Max are the engineering limits of writes (nil: none).
	Min, Max *float64
}

// TagValue is the VQT of the tag at Path.
type TagValue struct {
	Path string
	value.VQT
}

// TagWrite is one write: the tag path and the value, in value.Normalize
// form (integers int64 or uint64).
type TagWrite struct {
	Path  string
	Value value.Value
}

// WriteResult is the outcome of one write: Good when written, else the
// quality that refused it (Bad_UserAccessDenied for the grant's level or
// prefixes, Bad_NotWritable, Bad_OutOfRange, Uncertain when it timed out
// after it was sent) and why.
type WriteResult struct {
	Path    string
	Quality value.Quality
	Reason  string
}

// TagNode is one child of a folder in BrowseTags: a folder (Folder, with
// Tags tags under it, Type TypeUnknown) or a tag (with its value type).
type TagNode struct {
	Name   string
	Path   string
	Folder bool
	Tags   int
	Type   value.Type
}
