package main

import (
	"context"
	"flag"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/value"
)

// Tag selection of tags list, read and watch (docs/qubiqctl.md, "Choosing
// tags"): an argument is a tag path, a folder (every tag below it), or a
// pattern with *, ? or [...] matched segment by segment (** for any number
// of segments), where a pattern that matches a folder takes every tag
// below it; --all takes every tag.

// tagSel holds the flags of tags list, read and watch; each command's flags
// function resets it.
var tagSel tagSelFlags

type tagSelFlags struct {
	all           bool
	lines, redraw bool
	watchFor      time.Duration
}

// readBatch is how many paths one POST /tags/read carries (the request
// body limit is 1 MiB).
const readBatch = 1000

const selArgs = "PATH|FOLDER|PATTERN... | --all"

func init() {
	allFlag := func(fs *flag.FlagSet) {
		fs.BoolVar(&tagSel.all, "all", false, "every tag of the project")
	}
	commands["tags list"] = command{name: "tags list", args: "[PATH|FOLDER|PATTERN...]",
		help: "List the project's tags (type, device, address, write level, read-only, units), all of them or those chosen.",
		long: selectionHelp,
		flags: func(fs *flag.FlagSet, _ *opts) {
			tagSel = tagSelFlags{}
		}, run: cmdTagsList, complete: completeTags}
	commands["tags read"] = command{name: "tags read", args: selArgs,
		help: "Read tag values: value, quality, timestamp and the reason of a quality that is not Good. Exit 0 when the read was answered, whatever the qualities.",
		long: selectionHelp,
		flags: func(fs *flag.FlagSet, _ *opts) {
			tagSel.all = false
			allFlag(fs)
		}, run: cmdTagsRead, complete: completeTags}
}

const selectionHelp = `Choosing tags:
  Line1/Pump/Speed   that tag
  Line1/Pump         a folder: every tag below it
  'Line1/*'          a pattern: * and ? match within one segment, [...] a
                     set, ** any number of segments; a pattern that matches a
                     folder takes every tag below it ('Line1/*' is all of
                     Line1, '*/Pump/Speed' that tag on every line)
  --all              every tag
Quote patterns so that the shell does not expand them.`

// hasMeta reports whether s is a pattern.
func hasMeta(s string) bool { return strings.ContainsAny(s, "*?[") }

// matchPattern reports whether the pattern pat matches the tag path p or
// one of its folders: segments match with path.Match; a "**" segment
// matches any number of segments (none included).
func matchPattern(pat, p string) bool {
	return matchSegs(strings.Split(pat, "/"), strings.Split(p, "/"))
}

func matchSegs(pat, segs []string) bool {
	if len(pat) == 0 {
		return true // the pattern named this folder (or the tag itself)
	}
	if pat[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if matchSegs(pat[1:], segs[i:]) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return false
	}
	ok, err := path.Match(pat[0], segs[0])
	return err == nil && ok && matchSegs(pat[1:], segs[1:])
}

// underFolder reports whether p is below the folder f.
func underFolder(f, p string) bool {
	f = strings.TrimSuffix(f, "/")
	return strings.HasPrefix(p, f+"/")
}

// expand resolves selectors against the project's tag paths (in project
// order): each selector in turn, a tag as it is, a folder or pattern as
// the tags it takes (sorted), without repeats. known reports a selector
// that is neither a tag, a folder nor a matching pattern; such an exact
// path is kept (it reads Bad_NodeIdUnknown), a pattern is an error.
func expand(selectors, paths []string) ([]string, error) {
	isTag := make(map[string]bool, len(paths))
	for _, p := range paths {
		isTag[p] = true
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	var none []string
	for _, s := range selectors {
		if isTag[s] || (!hasMeta(s) && !slices.ContainsFunc(paths, func(p string) bool { return underFolder(s, p) })) {
			add(s)
			continue
		}
		var hits []string
		for _, p := range paths {
			if (hasMeta(s) && matchPattern(s, p)) || (!hasMeta(s) && underFolder(s, p)) {
				hits = append(hits, p)
			}
		}
		if len(hits) == 0 {
			none = append(none, s)
			continue
		}
		sort.Strings(hits)
		for _, p := range hits {
			add(p)
		}
	}
	if len(none) > 0 {
		return nil, fmt.Errorf("no tag matches %s (qubiqctl tags list shows the tags)", quoteList(none))
	}
	return out, nil
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// selectTags returns the tag paths args and --all choose, asking the
// daemon for the project's tags (GET /tags). No argument and no --all is a
// usage error; arguments beside --all too.
func (c *cli) selectTags(ctx context.Context, args []string, all bool) ([]string, error) {
	switch {
	case all && len(args) > 0:
		return nil, usagef("--all takes no PATH (give one or the other)")
	case !all && len(args) == 0:
		return nil, usagef("want %s", selArgs)
	}
	tags, err := c.c.ListTags(ctx)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(tags))
	for i, t := range tags {
		paths[i] = t.Path
	}
	if all {
		if len(paths) == 0 {
			return nil, fmt.Errorf("the project has no tags")
		}
		return paths, nil
	}
	return expand(args, paths)
}

func cmdTagsList(ctx context.Context, c *cli, _ *opts, args []string) error {
	tags, err := c.c.ListTags(ctx)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		paths := make([]string, len(tags))
		byPath := map[string]apitypes.TagInfo{}
		for i, t := range tags {
			paths[i], byPath[t.Path] = t.Path, t
		}
		chosen, err := expand(args, paths)
		if err != nil {
			return err
		}
		tags = tags[:0]
		for _, p := range chosen {
			if t, ok := byPath[p]; ok {
				tags = append(tags, t)
			}
		}
	}
	if c.g.json {
		return c.printJSON(nonNilSlice(tags))
	}
	t := newTable(c.stdout, "PATH", "TYPE", "DEVICE", "ADDRESS", "WRITE LEVEL", "READ-ONLY", "UNITS")
	for _, x := range tags {
		t.row(x.Path, x.Type, x.Device, x.Address, shownWriteLevel(x), yesNo(x.ReadOnly), x.Units)
	}
	return t.flush()
}

// shownWriteLevel is the WRITE LEVEL cell of a tag: "read-only" for a tag
// that no level may write (a simulator generator, an input register; the
// API's read_only), else its write level, as the console's Tags page shows
// it (docs/simulator.md, docs/console.md).
func shownWriteLevel(x apitypes.TagInfo) string {
	if x.ReadOnly {
		return "read-only"
	}
	return x.WriteLevel
}

// cmdTagsRead reads the chosen tags. Plain paths are read with one request
// (in batches of readBatch); only patterns, --all, and paths the daemon
// does not know as tags (they may be folders) need the tag list.
func cmdTagsRead(ctx context.Context, c *cli, _ *opts, args []string) error {
	var paths []string
	if tagSel.all || slices.ContainsFunc(args, hasMeta) {
		var err error
		if paths, err = c.selectTags(ctx, args, tagSel.all); err != nil {
			return err
		}
	} else {
		if err := nargs(args, 1, -1, selArgs); err != nil {
			return err
		}
		paths = args
	}
	vals, err := c.readAll(ctx, paths)
	if err != nil {
		return err
	}
	if !tagSel.all && !slices.ContainsFunc(args, hasMeta) {
		if vals, err = c.expandFolders(ctx, vals); err != nil {
			return err
		}
	}
	if c.g.json {
		return c.printJSON(vals)
	}
	t := newTable(c.stdout, "PATH", "VALUE", "QUALITY", "TIMESTAMP", "REASON")
	for _, v := range vals {
		t.row(v.Path, formatValue(v.Value), v.Quality, v.Timestamp.UTC().Format(tableTime), v.Reason)
	}
	return t.flush()
}

// readAll reads paths in batches.
func (c *cli) readAll(ctx context.Context, paths []string) ([]apitypes.TagValue, error) {
	var out []apitypes.TagValue
	for i := 0; i < len(paths); i += readBatch {
		vals, err := c.c.ReadTags(ctx, paths[i:min(i+readBatch, len(paths))]...)
		if err != nil {
			return nil, err
		}
		out = append(out, vals...)
	}
	return out, nil
}

// expandFolders replaces each Bad_NodeIdUnknown answer whose path is a
// folder of the project by the values of the tags below it. When the tag
// list cannot be read, the answers stay as they are.
func (c *cli) expandFolders(ctx context.Context, vals []apitypes.TagValue) ([]apitypes.TagValue, error) {
	if !slices.ContainsFunc(vals, func(v apitypes.TagValue) bool { return v.Quality == value.BadNodeIDUnknown.String() }) {
		return vals, nil
	}
	tags, err := c.c.ListTags(ctx)
	if err != nil {
		// The reads stand as answered; finding folders is a convenience.
		return vals, nil
	}
	var out []apitypes.TagValue
	for _, v := range vals {
		if v.Quality != value.BadNodeIDUnknown.String() {
			out = append(out, v)
			continue
		}
		var below []string
		for _, t := range tags {
			if underFolder(v.Path, t.Path) {
				below = append(below, t.Path)
			}
		}
		if len(below) == 0 {
			out = append(out, v)
			continue
		}
		sort.Strings(below)
		more, err := c.readAll(ctx, below)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// completeTags completes tag paths and folders from the daemon's tag list:
// the next segment of every path that starts with word.
func completeTags(ctx context.Context, c *cli, _ []string, word string) []string {
	tags, err := c.c.ListTags(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range tags {
		if !strings.HasPrefix(t.Path, word) {
			continue
		}
		cand := t.Path
		if i := strings.IndexByte(t.Path[len(word):], '/'); i >= 0 {
			cand = t.Path[:len(word)+i+1]
		}
		if !slices.Contains(out, cand) {
			out = append(out, cand)
		}
	}
	sort.Strings(out)
	return out
}
