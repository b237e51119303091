package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"qubiq.dev/edge/api/apitypes"
	"qubiq.dev/edge/client"
)

// The project and tag file commands (docs/project.md, "Tag files" and
// "Import and export"; docs/opcua.md, "Browsing and importing tags"):
// project import|export, tags import|export with CSV and YAML, tags import
// --browse DEVICE --root NODE for OPC UA, and devices
// browse to find the node to start from. Imports are all or nothing: a
// refused file prints every problem as FILE:LINE: message and exits 1.
func init() {
	commands["project import"] = command{name: "project import", args: "FILE",
		help: "Replace the project with FILE (YAML or JSON; - for stdin): checked like --check-config, applied without a restart, kept across restarts. Prints what changed.",
		run:  cmdProjectImport}
	commands["project export"] = command{name: "project export", args: "[-o FILE]",
		help: "Print the running project file (YAML), or write it to FILE.",
		flags: func(fs *flag.FlagSet, _ *opts) {
			projFlags = projectFlags{}
			fs.StringVar(&projFlags.output, "o", "", "write to FILE instead of stdout")
		}, run: cmdProjectExport}
	commands["tags import"] = command{name: "tags import",
		args: "FILE.csv|FILE.yaml [--format csv|yaml] | --browse DEVICE [--root NODE] [--prefix Folder/Sub] [--scan 1s] [--depth N] [-o FILE]",
		help: "Upsert the tags of a CSV or YAML file (format from the extension) into the project, all or nothing; or create a tag per Variable node found browsing an OPC UA device from NODE (type auto, read_only when not writable; -o writes the tag file instead of importing it).",
		flags: func(fs *flag.FlagSet, _ *opts) {
			projFlags = projectFlags{depth: defaultBrowseDepth}
			fs.StringVar(&projFlags.format, "format", "", "csv or yaml (default: from the file's extension)")
			fs.StringVar(&projFlags.browse, "browse", "", "OPC UA device to browse")
			fs.StringVar(&projFlags.root, "root", "", "node to browse from (default: the Objects folder)")
			fs.StringVar(&projFlags.prefix, "prefix", "", "tag path prefix of the tags made (Folder/Sub)")
			fs.StringVar(&projFlags.scan, "scan", "", "scan class of the tags made (1s, 500ms)")
			fs.IntVar(&projFlags.depth, "depth", defaultBrowseDepth, "how many levels of objects to descend")
			fs.StringVar(&projFlags.output, "o", "", "with --browse: write the tag file to FILE instead of importing it")
		}, run: cmdTagsImport}
	commands["tags export"] = command{name: "tags export", args: "[--format csv|yaml] [-o FILE]",
		help: "Print the project's tags as CSV (default) or YAML, or write them to FILE (format from its extension).",
		flags: func(fs *flag.FlagSet, _ *opts) {
			projFlags = projectFlags{}
			fs.StringVar(&projFlags.format, "format", "", "csv or yaml (default: from -o's extension, else csv)")
			fs.StringVar(&projFlags.output, "o", "", "write to FILE instead of stdout")
		}, run: cmdTagsExport}
	commands["devices browse"] = command{name: "devices browse", args: "DEVICE [NODE]",
		help: "List the children of NODE (default: the Objects folder) in an OPC UA device's address space: node id, browse name, class, data type, writable.",
		run:  cmdDevicesBrowse}
}

// defaultBrowseDepth bounds how deep tags import --browse descends.
const defaultBrowseDepth = 10

// maxBrowseTags bounds how many tags one tags import --browse makes.
const maxBrowseTags = 100000

// projectFlags holds the flags of these commands; each command's flags
// function resets it.
type projectFlags struct {
	format, output             string
	browse, root, prefix, scan string
	depth                      int
}

var projFlags projectFlags

func cmdProjectImport(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 1, "FILE"); err != nil {
		return err
	}
	doc, err := readInput(args[0])
	if err != nil {
		return err
	}
	ch, err := c.c.ImportProject(ctx, doc)
	if err != nil {
		return c.importError(args[0], err, true)
	}
	return c.printChanges(ch)
}

func cmdProjectExport(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	doc, err := c.c.ExportProject(ctx)
	if err != nil {
		return err
	}
	return c.writeDoc(projFlags.output, doc)
}

// formatOf returns the tag file format: flag, else from name's extension
// (.csv; .yaml, .yml, .json), else def ("" makes it a usage error).
func formatOf(flagValue, name, def string) (string, error) {
	switch flagValue {
	case "csv", "yaml":
		return flagValue, nil
	case "":
	default:
		return "", usagef("--format %q: want csv or yaml", flagValue)
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".csv":
		return "csv", nil
	case ".yaml", ".yml", ".json":
		return "yaml", nil
	}
	if def == "" {
		return "", usagef("cannot tell the format of %q from its extension (.csv, .yaml): give --format csv|yaml", name)
	}
	return def, nil
}

func cmdTagsImport(ctx context.Context, c *cli, _ *opts, args []string) error {
	f := projFlags
	if f.browse != "" {
		if err := nargs(args, 0, 0, "no FILE with --browse"); err != nil {
			return err
		}
		return c.importBrowsed(ctx, f)
	}
	if f.root != "" || f.prefix != "" || f.scan != "" || f.output != "" {
		return usagef("tags import: --root, --prefix, --scan and -o go with --browse DEVICE")
	}
	if err := nargs(args, 1, 1, "FILE.csv or FILE.yaml (or --browse DEVICE)"); err != nil {
		return err
	}
	format, err := formatOf(f.format, args[0], "")
	if err != nil {
		return err
	}
	doc, err := readInput(args[0])
	if err != nil {
		return err
	}
	ch, err := c.c.ImportTags(ctx, format, doc)
	if err != nil {
		return c.importError(args[0], err, false)
	}
	return c.printChanges(ch)
}

func cmdTagsExport(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 0, 0, "no arguments"); err != nil {
		return err
	}
	format, err := formatOf(projFlags.format, projFlags.output, "csv")
	if err != nil {
		return err
	}
	doc, err := c.c.ExportTags(ctx, format)
	if err != nil {
		return err
	}
	return c.writeDoc(projFlags.output, doc)
}

func cmdDevicesBrowse(ctx context.Context, c *cli, _ *opts, args []string) error {
	if err := nargs(args, 1, 2, "DEVICE [NODE]"); err != nil {
		return err
	}
	node := ""
	if len(args) == 2 {
		node = args[1]
	}
	nodes, err := c.c.BrowseDevice(ctx, args[0], node)
	if err != nil {
		return err
	}
	if c.g.json {
		return c.printJSON(nodes)
	}
	t := newTable(c.stdout, "NODE ID", "BROWSE NAME", "CLASS", "DATA TYPE", "WRITABLE")
	for _, n := range nodes {
		t.row(n.NodeID, n.BrowseName, n.NodeClass, n.DataType, yesNo(n.Writable))
	}
	return t.flush()
}

// writeDoc writes doc to name (atomically: a temporary file renamed over
// it), or to stdout when name is "" or "-".
func (c *cli) writeDoc(name string, doc []byte) error {
	if name == "" || name == "-" {
		_, err := c.stdout.Write(doc)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(doc); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	fmt.Fprintf(c.stderr, "qubiqctl: wrote %s (%d bytes)\n", name, len(doc))
	return nil
}

// printChanges prints what an import changed.
func (c *cli) printChanges(ch apitypes.ProjectChanges) error {
	if c.g.json {
		return c.printJSON(ch)
	}
	t := newTable(c.stdout, "", "ADDED", "CHANGED", "REMOVED")
	for _, r := range []struct {
		name string
		cs   apitypes.ChangeSet
	}{{"devices", ch.Devices}, {"tags", ch.Tags}} {
		t.row(r.name, listCell(r.cs.Added), listCell(r.cs.Changed), listCell(r.cs.Removed))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(ch.RestartRequired) > 0 {
		fmt.Fprintf(c.stdout, "\nrestart qubiqd to apply: %s\n", strings.Join(ch.RestartRequired, ", "))
	}
	return nil
}

// listCell prints up to 10 names of a change list, then how many more.
func listCell(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	if len(names) > 10 {
		return fmt.Sprintf("%s, ... (%d)", strings.Join(names[:10], ", "), len(names))
	}
	return strings.Join(names, ", ")
}

var (
	problemLineRe = regexp.MustCompile(`^line (\d+): `)
	problemFileRe = regexp.MustCompile(`^\S+?:(\d+): `)
)

// importError prints every problem of a refused import as "FILE:LINE:
// message" on stderr (the problem document with --json) and returns the
// error that exits 1; other errors pass through. "line N:" names a line of
// the file sent; with sameFile (a project import, sent as it is) so does
// the daemon's "PROJECT-FILE:N:".
func (c *cli) importError(file string, err error, sameFile bool) error {
	var ie *client.InvalidProjectError
	if !errors.As(err, &ie) {
		return err
	}
	if c.g.json {
		if perr := c.printJSON(apitypes.InvalidProjectProblem{Problem: apitypes.Problem{Type: ie.Type, Title: ie.Title,
			Status: ie.Status, Detail: ie.Detail, Kind: ie.Kind}, Errors: ie.Errors}); perr != nil {
			return perr
		}
	}
	for _, p := range ie.Errors {
		msg := p.Message
		if m := problemLineRe.FindString(msg); m != "" && p.Line > 0 {
			msg = fmt.Sprintf("%s:%d: %s", file, p.Line, msg[len(m):])
		} else if m := problemFileRe.FindString(msg); m != "" && p.Line > 0 && sameFile {
			msg = fmt.Sprintf("%s:%d: %s", file, p.Line, msg[len(m):])
		} else {
			msg = file + ": " + msg
		}
		fmt.Fprintf(c.stderr, "qubiqctl: %s\n", msg)
	}
	return fmt.Errorf("%s: %d problem(s); nothing was imported", file, len(ie.Errors))
}

// browsedTag is one tag made from a Variable node, written as the YAML tag
// file's flow mapping (JSON strings are YAML double-quoted scalars).
type browsedTag struct {
	Path     string `json:"path"`
	Device   string `json:"device"`
	Address  string `json:"address"`
	Type     string `json:"type"`
	Scan     string `json:"scan,omitempty"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// importBrowsed browses the device recursively from --root, makes a tag
// per Variable node and imports them as a YAML tag file (or writes it to
// -o).
func (c *cli) importBrowsed(ctx context.Context, f projectFlags) error {
	if f.scan != "" {
		if d, err := time.ParseDuration(f.scan); err != nil || d <= 0 {
			return usagef("tags import: --scan %q: want a duration such as 1s or 500ms", f.scan)
		}
	}
	if f.depth < 1 {
		return usagef("tags import: --depth must be at least 1")
	}
	prefix := strings.Trim(f.prefix, "/")
	tags, err := browseTags(ctx, c.c, f, prefix)
	if err != nil {
		return err
	}
	if len(tags) == 0 {
		return fmt.Errorf("no Variable node under %q on device %s (devices browse %s %s lists the children)",
			f.root, f.browse, f.browse, f.root)
	}
	doc, err := tagsYAML(tags)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("browse of %s", f.browse)
	if f.output != "" {
		return c.writeDoc(f.output, doc)
	}
	fmt.Fprintf(c.stderr, "qubiqctl: %d tags from %s; importing\n", len(tags), f.browse)
	ch, err := c.c.ImportTags(ctx, "yaml", doc)
	if err != nil {
		return c.importError(name, err, false)
	}
	return c.printChanges(ch)
}

// tagsYAML writes tags as a YAML tag file, one flow mapping per line.
func tagsYAML(tags []browsedTag) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("tags:\n")
	for _, t := range tags {
		var line bytes.Buffer
		enc := json.NewEncoder(&line)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(t); err != nil {
			return nil, err
		}
		buf.WriteString("  - ")
		buf.Write(bytes.TrimSpace(line.Bytes()))
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// browser is what browseTags needs of the client.
type browser interface {
	BrowseDevice(ctx context.Context, name, node string) ([]apitypes.BrowseNode, error)
}

// browseTags walks the address space from f.root depth-first: a Variable
// node becomes a tag (path: prefix + the browse names down to it, each
// made a valid path segment; address: its node id; type auto; read_only
// when not writable), an Object node is descended into (up to f.depth
// levels; a node seen before is not visited again). Two nodes that would
// get the same path get _2, _3 ... appended.
func browseTags(ctx context.Context, b browser, f projectFlags, prefix string) ([]browsedTag, error) {
	var out []browsedTag
	seen := map[string]bool{f.root: true}
	paths := map[string]int{}
	var walk func(node string, names []string, depth int) error
	walk = func(node string, names []string, depth int) error {
		kids, err := b.BrowseDevice(ctx, f.browse, node)
		if err != nil {
			return fmt.Errorf("browse %s %q: %w", f.browse, node, err)
		}
		for _, k := range kids {
			if seen[k.NodeID] {
				continue
			}
			seen[k.NodeID] = true
			seg := pathSegment(k.BrowseName, k.NodeID)
			here := append(append([]string{}, names...), seg)
			switch k.NodeClass {
			case "Variable":
				p := strings.Join(here, "/")
				if prefix != "" {
					p = prefix + "/" + p
				}
				if n := paths[p]; n > 0 {
					paths[p] = n + 1
					p = fmt.Sprintf("%s_%d", p, n+1)
				} else {
					paths[p] = 1
				}
				out = append(out, browsedTag{Path: p, Device: f.browse, Address: k.NodeID, Type: "auto", Scan: f.scan, ReadOnly: !k.Writable})
				if len(out) > maxBrowseTags {
					return fmt.Errorf("browse %s: more than %d variables; choose a narrower --root", f.browse, maxBrowseTags)
				}
			case "Object":
				if depth < f.depth {
					if err := walk(k.NodeID, here, depth+1); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(f.root, nil, 1); err != nil {
		return nil, err
	}
	return out, nil
}

var segmentBad = regexp.MustCompile(`[^A-Za-z0-9_.\- ]+`)

// pathSegment makes a browse name a tag path segment (docs/project.md,
// "Tag paths": letters, digits, _ - . and space): other characters become
// _, and an empty name takes the node id's.
func pathSegment(name, nodeID string) string {
	s := strings.TrimSpace(segmentBad.ReplaceAllString(name, "_"))
	if s == "" || strings.Trim(s, "_") == "" {
		s = strings.Trim(segmentBad.ReplaceAllString(nodeID, "_"), "_ ")
	}
	if s == "" {
		s = "node"
	}
	return s
}
