package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
)

// debOptions says what goes into the .deb.
type debOptions struct {
	Version     string
	Arch        string
	SlotDir     string // slot a's contents (bin/, python/, manifest.json)
	SlotAgent   string // the qubiq-slot binary
	Unit        string // systemd/qubiqd.service
	Config      string // packaging/qubiq.yaml
	TrustedKeys string // the trusted-firmware-keys file to ship
	Doc         string // docs/appliance.md
	ScriptsDir  string // packaging/scripts
	Depends     []string
	Out         string // the .deb to write
	MTime       time.Time
}

// buildDeb writes the package with nfpm: slot a under /usr/lib/qubiq/slots/a,
// the slot agent, the unit, the conffiles, the /usr/bin links through
// current, and the maintainer scripts.
func buildDeb(o debOptions) error {
	var contents files.Contents
	add := func(c *files.Content) { contents = append(contents, c) }
	base := "/usr/lib/qubiq/slots/a"
	err := filepath.WalkDir(o.SlotDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(o.SlotDir, p)
		dst := filepath.ToSlash(filepath.Join(base, rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			add(&files.Content{Destination: dst, Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Mode: 0o755, MTime: o.MTime}})
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			add(&files.Content{Source: t, Destination: dst, Type: files.TypeSymlink})
		default:
			add(&files.Content{Source: p, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: fi.Mode().Perm(), MTime: o.MTime}})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range []*files.Content{
		{Source: o.SlotAgent, Destination: "/usr/lib/qubiq/qubiq-slot", FileInfo: &files.ContentFileInfo{Mode: 0o755}},
		{Source: o.Unit, Destination: "/lib/systemd/system/qubiqd.service", FileInfo: &files.ContentFileInfo{Mode: 0o644}},
		{Source: o.Config, Destination: "/etc/qubiq/qubiq.yaml", Type: files.TypeConfigNoReplace, FileInfo: &files.ContentFileInfo{Mode: 0o640}},
		{Source: o.TrustedKeys, Destination: "/etc/qubiq/trusted-firmware-keys", Type: files.TypeConfigNoReplace, FileInfo: &files.ContentFileInfo{Mode: 0o640}},
		{Source: o.Doc, Destination: "/usr/share/doc/qubiq/appliance.md", FileInfo: &files.ContentFileInfo{Mode: 0o644}},
		{Source: "/usr/lib/qubiq/current/bin/qubiqd", Destination: "/usr/bin/qubiqd", Type: files.TypeSymlink},
		{Source: "/usr/lib/qubiq/current/bin/qubiqctl", Destination: "/usr/bin/qubiqctl", Type: files.TypeSymlink},
	} {
		if c.FileInfo != nil {
			c.FileInfo.MTime = o.MTime
		}
		add(c)
	}
	info := &nfpm.Info{
		Name:        "qubiq",
		Arch:        o.Arch,
		Platform:    "linux",
		Version:     o.Version,
		Section:     "net",
		Priority:    "optional",
		Maintainer:  "QUBIQ Edge <edge@qubiq.dev>",
		Description: "QUBIQ Edge industrial gateway daemon\nTag engine, Modbus/OPC UA drivers, sandboxed Python scripts, LiveView and REST API,\nin A/B firmware slots with a private Python runtime.",
		Homepage:    "https://qubiq.dev/edge",
		License:     "Proprietary",
		MTime:       o.MTime,
		Overridables: nfpm.Overridables{
			Depends:  append([]string{"adduser"}, o.Depends...),
			Contents: contents,
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(o.ScriptsDir, "postinst"),
				PreRemove:   filepath.Join(o.ScriptsDir, "prerm"),
				PostRemove:  filepath.Join(o.ScriptsDir, "postrm"),
			},
		},
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return fmt.Errorf("nfpm: %w", err)
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(o.Out)
	if err != nil {
		return err
	}
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		os.Remove(o.Out)
		return fmt.Errorf("nfpm deb: %w", err)
	}
	return f.Close()
}
