package opcua

import (
	"strings"
	"testing"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"
)

// TestStandardDataTypes_MatchTheNodeSet: every name of the table is the
// node set's name of that id (gopcua's generated names differ only in
// the case of acronyms: GUID, NodeID), and a browse names a standard
// DataType by it, another by its address.
func TestStandardDataTypes_MatchTheNodeSet(t *testing.T) {
	for i, name := range standardDataTypes {
		if got := id.Name(i); !strings.EqualFold(got, name) {
			t.Errorf("i=%d: table %q, node set %q", i, name, got)
		}
	}
	if got := dataTypeName(ua.NewNumericNodeID(0, 294), nil); got != "UtcTime" {
		t.Errorf("i=294 = %q, want UtcTime", got)
	}
	if got := dataTypeName(ua.NewNumericNodeID(0, 2138), nil); got == "" || got == "ServerStatusType" {
		t.Errorf("i=2138 (not a standard DataType of the table) = %q, want its address", got)
	}
}
