package config

import (
	"bytes"
	"reflect"
	"slices"

	"gopkg.in/yaml.v3"
)

// ProjectDiff says what a new project changes against the running one:
// device and tag names added, changed (any key) and removed, each sorted,
// and the other sections whose content differs (scripts, connections,
// named_queries, message_handlers, flows, views, users).
type ProjectDiff struct {
	DevicesAdded, DevicesChanged, DevicesRemoved []string
	TagsAdded, TagsChanged, TagsRemoved          []string
	Sections                                     []string
}

// DiffProjects compares two projects (old may be empty). Lines and file
// names do not count; device configs compare by driver and keys.
func DiffProjects(old, new *Project) ProjectDiff {
	var d ProjectDiff
	od := map[string]DeviceConfig{}
	for _, x := range old.Devices {
		od[x.Name] = x
	}
	nd := map[string]bool{}
	for _, x := range new.Devices {
		nd[x.Name] = true
		o, ok := od[x.Name]
		switch {
		case !ok:
			d.DevicesAdded = append(d.DevicesAdded, x.Name)
		case o.Driver != x.Driver || !bytes.Equal(o.Raw, x.Raw):
			d.DevicesChanged = append(d.DevicesChanged, x.Name)
		}
	}
	for _, x := range old.Devices {
		if !nd[x.Name] {
			d.DevicesRemoved = append(d.DevicesRemoved, x.Name)
		}
	}
	ot := map[string]TagConfig{}
	for _, x := range old.Tags {
		x.Line = 0
		ot[x.Path] = x
	}
	nt := map[string]bool{}
	for _, x := range new.Tags {
		nt[x.Path] = true
		x.Line = 0
		o, ok := ot[x.Path]
		switch {
		case !ok:
			d.TagsAdded = append(d.TagsAdded, x.Path)
		case !reflect.DeepEqual(o, x):
			d.TagsChanged = append(d.TagsChanged, x.Path)
		}
	}
	for _, x := range old.Tags {
		if !nt[x.Path] {
			d.TagsRemoved = append(d.TagsRemoved, x.Path)
		}
	}
	if !reflect.DeepEqual(old.Scripts, new.Scripts) && (len(old.Scripts) > 0 || len(new.Scripts) > 0) {
		d.Sections = append(d.Sections, "scripts")
	}
	for _, s := range []struct {
		name     string
		old, new []yaml.Node
	}{
		{"connections", old.Connections, new.Connections},
		{"named_queries", old.NamedQueries, new.NamedQueries},
		{"message_handlers", old.MessageHandlers, new.MessageHandlers},
		{"flows", old.Flows, new.Flows},
		{"views", old.Views, new.Views},
		{"users", old.Users, new.Users},
		{"mqtt_publish", []yaml.Node{old.MQTTPublish}, []yaml.Node{new.MQTTPublish}},
	} {
		if !sameNodes(s.old, s.new) {
			d.Sections = append(d.Sections, s.name)
		}
	}
	for _, l := range []*[]string{&d.DevicesAdded, &d.DevicesChanged, &d.DevicesRemoved, &d.TagsAdded, &d.TagsChanged, &d.TagsRemoved} {
		slices.Sort(*l)
	}
	return d
}

// sameNodes compares YAML sections by content (not position or style).
func sameNodes(a, b []yaml.Node) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		var x, y any
		if a[i].Decode(&x) != nil || b[i].Decode(&y) != nil || !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
