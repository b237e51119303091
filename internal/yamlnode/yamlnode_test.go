package yamlnode

import (
	"encoding/json"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestJSONable_NonStringKeysAndNesting(t *testing.T) {
	in := map[string]any{"a": map[any]any{1: "x", true: []any{map[any]any{"k": 2}}}}
	b, err := json.Marshal(JSONable(in))
	if err != nil || string(b) != `{"a":{"1":"x","true":[{"k":2}]}}` {
		t.Fatalf("%s %v", b, err)
	}
}

func TestDecodeStrict_UnknownKeyAndKind(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("- {name: a, colour: red}\n- [1]\n"), &doc); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Name string `yaml:"name"`
	}
	items := doc.Content[0].Content
	if err := DecodeStrict(items[0], &v); err == nil || !strings.Contains(err.Error(), "colour") || strings.HasPrefix(err.Error(), "yaml:") {
		t.Fatalf("unknown key: %v", err)
	}
	if err := DecodeStrict(items[1], &v); err == nil || err.Error() != "want a mapping, have a list" {
		t.Fatalf("list: %v", err)
	}
}
