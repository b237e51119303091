package opcua

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAddress_Valid(t *testing.T) {
	for _, tc := range []struct {
		in, canonical string
		uri           string
		index         uint16
		typ           IDType
		id            string
	}{
		{"nsu=urn:vendor:plc;s=Line1.Speed", "nsu=urn:vendor:plc;s=Line1.Speed", "urn:vendor:plc", 0, String, "Line1.Speed"},
		{"nsu=urn:vendor:plc;i=123", "nsu=urn:vendor:plc;i=123", "urn:vendor:plc", 0, Numeric, "123"},
		{"ns=2;s=Speed", "ns=2;s=Speed", "", 2, String, "Speed"},
		{"ns=2;i=0005", "ns=2;i=5", "", 2, Numeric, "5"},
		{"i=2258", "i=2258", "", 0, Numeric, "2258"},
		{"ns=0;i=85", "i=85", "", 0, Numeric, "85"},
		{"nsu=http://opcfoundation.org/UA/;i=85", "i=85", "", 0, Numeric, "85"},
		{"s=Plain", "s=Plain", "", 0, String, "Plain"},
		{"ns=3;s=a;b=c", "ns=3;s=a;b=c", "", 3, String, "a;b=c"},
		{"ns=1;g=72962b91-fa75-4ae6-8d28-b404dc7daf63", "ns=1;g=72962B91-FA75-4AE6-8D28-B404DC7DAF63", "", 1, GUID, "72962B91-FA75-4AE6-8D28-B404DC7DAF63"},
		{"ns=1;b=AAEC/w==", "ns=1;b=AAEC/w==", "", 1, ByteString, "AAEC/w=="},
		{"nsu=urn:a%3Bb;s=X", "nsu=urn:a%3Bb;s=X", "urn:a;b", 0, String, "X"},
		{"ns=65535;i=4294967295", "ns=65535;i=4294967295", "", 65535, Numeric, "4294967295"},
		{"ns=2;s=Ünïcode Name", "ns=2;s=Ünïcode Name", "", 2, String, "Ünïcode Name"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			a, err := ParseAddress(tc.in)
			if err != nil {
				t.Fatalf("ParseAddress: %v", err)
			}
			if a.String() != tc.canonical || a.URI != tc.uri || a.Index != tc.index || a.Type != tc.typ || a.ID != tc.id {
				t.Errorf("got %+v (%s), want %s uri=%q ns=%d %c=%s", a, a, tc.canonical, tc.uri, tc.index, tc.typ, tc.id)
			}
			b, err := ParseAddress(a.String())
			if err != nil || b.String() != a.String() {
				t.Errorf("the canonical form %q does not parse back: %v", a, err)
			}
		})
	}
}

func TestParseAddress_Invalid(t *testing.T) {
	for _, in := range []string{
		"", "!!!", "HR100", "40101", "no such address", "ramp(1,2", "HR100:", "\x00\xff",
		"nsu=urn:x", "nsu=;s=X", "ns=2", "ns=x;s=Y", "ns=70000;i=1", "ns=2;q=1", "ns=2;s=",
		"i=", "i=-1", "i=4294967296", "i=1.5", "g=1234", "ns=1;g=zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
		"b=", "b=!!", "s=a\nb", "nsu=urn:%zz;s=X", strings.Repeat("9", 300), "s=" + strings.Repeat("x", 4097),
	} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseAddress(in)
			if err == nil {
				t.Fatalf("ParseAddress(%q) = nil error", in)
			}
			if !strings.Contains(err.Error(), "opcua address") {
				t.Errorf("error %q does not say it is an opcua address", err)
			}
		})
	}
}

func TestNodeAddress_Canonical_ConvertsIndexToURI(t *testing.T) {
	ns := []string{StandardNamespace, "urn:server", "urn:vendor:plc", "urn:other"}
	for _, tc := range []struct{ in, want string }{
		{"ns=2;s=Line1.Speed", "nsu=urn:vendor:plc;s=Line1.Speed"},
		{"ns=3;i=7", "nsu=urn:other;i=7"},
		{"ns=0;i=2258", "i=2258"},
		{"nsu=urn:vendor:plc;s=X", "nsu=urn:vendor:plc;s=X"},
	} {
		a, _ := ParseAddress(tc.in)
		c, err := a.Canonical(ns)
		if err != nil || c.String() != tc.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tc.in, c, err, tc.want)
		}
	}
	a, _ := ParseAddress("ns=9;s=X")
	if _, err := a.Canonical(ns); !errors.Is(err, ErrNamespaceUnknown) {
		t.Errorf("Canonical(ns=9) error %v, want ErrNamespaceUnknown", err)
	}
}

// C14: the URI form is resolved through the namespace array of each
// session, so a re-ordered array still gives the right node.
func TestNodeAddress_Resolve_FollowsNamespaceArray(t *testing.T) {
	before := []string{StandardNamespace, "urn:server", "urn:vendor:plc", "urn:other"}
	after := []string{StandardNamespace, "urn:server", "urn:other", "urn:vendor:plc"}
	a, _ := ParseAddress("nsu=urn:vendor:plc;s=Line1.Speed")
	for _, tc := range []struct {
		ns   []string
		want string
	}{{before, "ns=2;s=Line1.Speed"}, {after, "ns=3;s=Line1.Speed"}} {
		id, err := a.Resolve(tc.ns)
		if err != nil || id.String() != tc.want {
			t.Errorf("Resolve(%v) = %v, %v; want %s", tc.ns, id, err, tc.want)
		}
	}
	if _, err := a.Resolve([]string{StandardNamespace}); !errors.Is(err, ErrNamespaceUnknown) {
		t.Errorf("Resolve without the namespace: %v, want ErrNamespaceUnknown", err)
	}
	g, _ := ParseAddress("nsu=urn:other;g=72962B91-FA75-4AE6-8D28-B404DC7DAF63")
	if id, err := g.Resolve(after); err != nil || id.String() != "ns=2;g=72962B91-FA75-4AE6-8D28-B404DC7DAF63" {
		t.Errorf("Resolve GUID = %v, %v", id, err)
	}
	b, _ := ParseAddress("nsu=urn:other;b=AAEC/w==")
	if id, err := b.Resolve(after); err != nil || id.String() != "ns=2;b=AAEC/w==" {
		t.Errorf("Resolve opaque = %v, %v", id, err)
	}
}

func TestAddressOf_NodeIDToURIForm(t *testing.T) {
	ns := []string{StandardNamespace, "urn:server", "urn:vendor:plc"}
	for _, in := range []string{"nsu=urn:vendor:plc;s=X", "nsu=urn:vendor:plc;i=42", "i=85", "nsu=urn:server;b=AAEC/w=="} {
		a, _ := ParseAddress(in)
		id, err := a.Resolve(ns)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AddressOf(id, ns)
		if err != nil || got.String() != in {
			t.Errorf("AddressOf(%s) = %s, %v; want %s", id, got, err, in)
		}
	}
}
