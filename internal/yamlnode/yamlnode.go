// Package yamlnode holds the two YAML helpers the project's parsers share:
// JSONable, which turns what yaml.v3 decodes into values encoding/json
// accepts (a device's driver keys, a view's widget options), and
// DecodeStrict, which decodes one project-file entry refusing unknown keys
// (connections, named queries, message handlers). Imported by config,
// api/liveview, store/sqldb and the service layer; it imports only
// gopkg.in/yaml.v3 and the standard library.
package yamlnode

import (
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// JSONable turns a value decoded from YAML into one encoding/json can
// marshal: maps with non-string keys (map[any]any) become map[string]any
// with the keys printed (fmt.Sprint), recursively through maps and lists.
// Maps and lists are changed in place; other values are returned as they
// are.
func JSONable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = JSONable(e)
		}
		return x
	case map[any]any:
		m := map[string]any{}
		for k, e := range x {
			m[fmt.Sprint(k)] = JSONable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = JSONable(e)
		}
		return x
	}
	return v
}

// DecodeStrict decodes the YAML mapping node n into v, refusing keys v does
// not have (yaml.v3 applies KnownFields only to a Decoder, so the node is
// encoded again and decoded). A node that is not a mapping is an error
// "want a mapping, have a list"; decoding errors lose yaml.v3's "yaml: "
// prefix and keep the line numbers, which are relative to n.
func DecodeStrict(n *yaml.Node, v any) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("want a mapping, have a %s", kindName(n.Kind))
	}
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return "node"
}
