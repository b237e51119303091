package opcua

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gopcua/opcua/ua"
)

// StandardNamespace is the URI of namespace 0 (OPC UA Part 3 §8.2.2): its
// index never changes, so its node ids need no nsu= prefix.
const StandardNamespace = "http://opcfoundation.org/UA/"

// maxStringID bounds s= identifiers (OPC UA Part 3 §8.2.4: 4096 bytes).
const maxStringID = 4096

// ErrNamespaceUnknown is wrapped by NodeAddress.Resolve and NodeAddress.Canonical
// when the server's namespace array does not hold the address's namespace
// URI or index. Tags read it as Bad_NodeIdUnknown.
var ErrNamespaceUnknown = errors.New("namespace not in the server's namespace array")

// IDType is the kind of identifier of a node id (OPC UA Part 3 §8.2.3).
type IDType byte

// Identifier kinds, by their letter in the string form (Part 6 §5.3.1.10).
const (
	Numeric    IDType = 'i'
	String     IDType = 's'
	GUID       IDType = 'g'
	ByteString IDType = 'b'
)

// NodeAddress is a parsed OPC UA tag address (docs/opcua.md, Tags and
// addresses): a namespace, by URI (nsu=, which survives index changes) or by
// index (ns=, converted to the URI form at the first successful connection),
// and an identifier. Build it with ParseAddress.
type NodeAddress struct {
	// URI is the namespace URI of the nsu= form, "" for the ns= form.
	URI string
	// Index is the namespace index of the ns= form (0 for namespace 0).
	Index uint16
	// Type is the identifier kind; ID its text: decimal for Numeric, the
	// string for String, the canonical upper-case GUID for GUID, standard
	// base64 for ByteString.
	Type IDType
	ID   string

	num uint32
	raw []byte
}

// HasURI reports whether a names its namespace by URI (or is in namespace 0,
// whose URI is fixed).
func (a NodeAddress) HasURI() bool { return a.URI != "" || a.Index == 0 }

// ParseAddress parses the address text of a tag:
//
//	nsu=<namespace URI>;<id>   ns=<index>;<id>   <id> (namespace 0)
//
// where <id> is i=<uint32>, s=<string>, g=<GUID> or b=<base64>. In the URI a
// ';' is written %3B and a '%' is written %25. Errors name the address text.
func ParseAddress(s string) (NodeAddress, error) {
	a, err := parseAddress(s)
	if err != nil {
		return NodeAddress{}, fmt.Errorf("opcua address %q: %w", s, err)
	}
	return a, nil
}

func parseAddress(s string) (NodeAddress, error) {
	var a NodeAddress
	if s == "" {
		return a, errors.New("empty")
	}
	if !utf8.ValidString(s) {
		return a, errors.New("not valid UTF-8")
	}
	rest := s
	switch {
	case strings.HasPrefix(rest, "nsu="):
		i := strings.IndexByte(rest, ';')
		if i < 0 {
			return a, errors.New("nsu= needs ;i=, ;s=, ;g= or ;b= after the namespace URI")
		}
		uri, err := unescapeURI(rest[4:i])
		if err != nil {
			return a, err
		}
		if uri == "" {
			return a, errors.New("empty namespace URI")
		}
		if uri != StandardNamespace {
			a.URI = uri
		}
		rest = rest[i+1:]
	case strings.HasPrefix(rest, "ns="):
		i := strings.IndexByte(rest, ';')
		if i < 0 {
			return a, errors.New("ns= needs ;i=, ;s=, ;g= or ;b= after the index")
		}
		n, err := strconv.ParseUint(rest[3:i], 10, 16)
		if err != nil {
			return a, fmt.Errorf("namespace index %q is not an integer 0..65535", rest[3:i])
		}
		a.Index = uint16(n)
		rest = rest[i+1:]
	}
	if len(rest) < 2 || rest[1] != '=' {
		return a, errors.New("want i=, s=, g= or b= (optionally after nsu=<uri>; or ns=<index>;)")
	}
	id := rest[2:]
	switch IDType(rest[0]) {
	case Numeric:
		n, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return a, fmt.Errorf("numeric identifier %q is not an integer 0..4294967295", id)
		}
		a.Type, a.num, a.ID = Numeric, uint32(n), strconv.FormatUint(n, 10)
	case String:
		if id == "" {
			return a, errors.New("empty string identifier")
		}
		if len(id) > maxStringID {
			return a, fmt.Errorf("string identifier longer than %d bytes", maxStringID)
		}
		for _, r := range id {
			if unicode.IsControl(r) {
				return a, errors.New("control character in the string identifier")
			}
		}
		a.Type, a.ID = String, id
	case GUID:
		g := ua.NewGUID(id)
		if g == nil || strings.Count(id, "-") != 4 || len(id) != 36 {
			return a, fmt.Errorf("GUID identifier %q: want 8-4-4-4-12 hex digits", id)
		}
		a.Type, a.ID = GUID, g.String()
	case ByteString:
		b, err := base64.StdEncoding.DecodeString(id)
		if err != nil || len(b) == 0 {
			return a, fmt.Errorf("opaque identifier %q is not non-empty base64", id)
		}
		a.Type, a.raw, a.ID = ByteString, b, base64.StdEncoding.EncodeToString(b)
	default:
		return a, errors.New("want i=, s=, g= or b= (optionally after nsu=<uri>; or ns=<index>;)")
	}
	return a, nil
}

// unescapeURI decodes %XX escapes of a namespace URI.
func unescapeURI(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("bad escape in namespace URI %q", s)
		}
		n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape in namespace URI %q", s)
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String(), nil
}

func escapeURI(s string) string {
	return strings.NewReplacer("%", "%25", ";", "%3B").Replace(s)
}

func (a NodeAddress) idText() string { return string(a.Type) + "=" + a.ID }

// String returns the address in its canonical text form: "nsu=<uri>;<id>",
// "ns=<index>;<id>", or "<id>" in namespace 0.
func (a NodeAddress) String() string {
	switch {
	case a.URI != "":
		return "nsu=" + escapeURI(a.URI) + ";" + a.idText()
	case a.Index != 0:
		return "ns=" + strconv.Itoa(int(a.Index)) + ";" + a.idText()
	}
	return a.idText()
}

// Canonical returns a in the nsu= form, the index of an ns= address looked
// up in the server's namespace array (OPC UA Part 5 §6.3.1, NamespaceArray).
// Addresses already in the URI form, or in namespace 0, are returned as they
// are. An index outside the array wraps ErrNamespaceUnknown.
func (a NodeAddress) Canonical(namespaces []string) (NodeAddress, error) {
	if a.HasURI() {
		return a, nil
	}
	if int(a.Index) >= len(namespaces) {
		return a, fmt.Errorf("opcua address %q: index %d: %w", a.String(), a.Index, ErrNamespaceUnknown)
	}
	b := a
	b.URI, b.Index = namespaces[a.Index], 0
	if b.URI == StandardNamespace {
		b.URI = ""
	}
	return b, nil
}

// Resolve returns the node id of a for a session whose namespace array is
// namespaces: the URI is looked up on every call, so an address keeps
// naming the same node after the server re-orders its namespaces
// (docs/opcua.md, fault C14). A URI missing from the array wraps
// ErrNamespaceUnknown.
func (a NodeAddress) Resolve(namespaces []string) (*ua.NodeID, error) {
	idx := a.Index
	if a.URI != "" {
		found := false
		for i, ns := range namespaces {
			if ns == a.URI {
				idx, found = uint16(i), true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("opcua address %q: %w", a.String(), ErrNamespaceUnknown)
		}
	}
	switch a.Type {
	case Numeric:
		return ua.NewNumericNodeID(idx, a.num), nil
	case String:
		return ua.NewStringNodeID(idx, a.ID), nil
	case GUID:
		return ua.NewGUIDNodeID(idx, a.ID), nil
	case ByteString:
		return ua.NewByteStringNodeID(idx, a.raw), nil
	}
	return nil, fmt.Errorf("opcua address %q: no identifier", a.String())
}

// AddressOf returns the nsu= form of a node id received from the server
// (browse results), looking its index up in namespaces.
func AddressOf(id *ua.NodeID, namespaces []string) (NodeAddress, error) {
	var a NodeAddress
	if id == nil {
		return a, errors.New("no node id")
	}
	a.Index = id.Namespace()
	switch id.Type() {
	case ua.NodeIDTypeTwoByte, ua.NodeIDTypeFourByte, ua.NodeIDTypeNumeric:
		a.Type, a.num, a.ID = Numeric, id.IntID(), strconv.FormatUint(uint64(id.IntID()), 10)
	case ua.NodeIDTypeString:
		a.Type, a.ID = String, id.StringID()
	case ua.NodeIDTypeGUID:
		a.Type, a.ID = GUID, id.StringID()
	case ua.NodeIDTypeByteString:
		a.Type, a.ID = ByteString, id.StringID()
		a.raw, _ = base64.StdEncoding.DecodeString(a.ID)
	default:
		return a, fmt.Errorf("node id %s: unknown identifier type", id)
	}
	return a.Canonical(namespaces)
}
