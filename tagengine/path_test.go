package tagengine

import (
	"context"
	"strings"
	"testing"

	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/device"
	"qubiq.dev/edge/value"
)

// Unicode letters are letters, and a path is one tag whether it comes
// precomposed (NFC) or decomposed: the engine compares in NFC.
func TestEngine_Paths_UnicodeAndNFC(t *testing.T) {
	drv := newFake()
	nfc := "Halle 1/Kühlung/Vorlauf"
	e, err := New(Config{}, map[string]device.Driver{"d": drv}, []Tag{
		{Path: nfc, Device: "d", Point: device.Point{Address: "v", Type: value.Int16}},
	})
	if err != nil {
		t.Fatal(err)
	}
	nfd := "Halle 1/Ku\u0308hlung/Vorlauf"
	g := auth.Full("t", "", "")
	res, err := e.Read(g, []string{nfd})
	if err != nil || res[0].Quality == value.BadNodeIDUnknown {
		t.Fatalf("read by the NFD spelling: %+v, %v", res, err)
	}
	wr, err := e.Write(context.Background(), g, []WriteRequest{{Path: nfd, Value: int64(3)}})
	if err != nil || wr[0].Quality != value.Good {
		t.Fatalf("write by the NFD spelling: %+v, %v", wr, err)
	}
	// A prefix grant matches whole segments of the NFC path.
	g.Prefixes = []string{"Halle 1/Kühlung"}
	if res, _ := e.Read(g, []string{nfd}); res[0].Quality == value.BadUserAccessDenied {
		t.Fatalf("prefix grant refused the NFD spelling: %+v", res[0])
	}
}

func TestEngine_New_RefusesBadPaths(t *testing.T) {
	for _, p := range []string{"a//b", "a/+", "Ku\u0308hlung", strings.Repeat("x/", 600) + "x"} {
		_, err := New(Config{}, map[string]device.Driver{"d": newFake()}, []Tag{
			{Path: p, Device: "d", Point: device.Point{Address: "v", Type: value.Int16}},
		})
		if err == nil || !strings.Contains(err.Error(), "tag path") {
			t.Errorf("New with path %.40q: %v, want a tag path error", p, err)
		}
	}
}
