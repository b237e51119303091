package tagpath

import (
	"errors"
	"strings"
	"testing"
)

func TestClean_UnicodeLettersAndNFC(t *testing.T) {
	cases := map[string]string{
		"Line1/Pump/Speed":              "Line1/Pump/Speed",
		"Halle 1/Kühlung/Vorlauf":       "Halle 1/Kühlung/Vorlauf",
		"Halle 1/Ku\u0308hlung/Vorlauf": "Halle 1/Kühlung/Vorlauf", // NFD → NFC: one name is one tag
		"工場/ライン1/温度":                    "工場/ライン1/温度",
		"Цех/Насос-2/Скорость_об.мин":   "Цех/Насос-2/Скорость_об.мин",
		"प्लांट/तापमान":                 "प्लांट/तापमान", // combining vowel signs (\p{M})
		"a":                             "a",
		"x/1.5/m²":                      "x/1.5/m²", // ² is a number (\p{No})
	}
	for in, want := range cases {
		got, err := Clean(in)
		if err != nil || got != want {
			t.Errorf("Clean(%q) = %q, %v; want %q", in, got, err, want)
		}
		if err := Check(want); err != nil {
			t.Errorf("Check(%q) = %v", want, err)
		}
	}
}

func TestCheck_RefusesNonNFC(t *testing.T) {
	err := Check("Ku\u0308hlung")
	if err == nil || !strings.Contains(err.Error(), "NFC") || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Check(NFD) = %v, want a refusal naming NFC", err)
	}
}

func TestClean_RefusesEachKind(t *testing.T) {
	long := strings.Repeat("a", MaxSegmentBytes+1)
	deep := strings.Repeat("a/", MaxDepth) + "a"
	huge := strings.Repeat("abcdefgh/", 5000) // a 40 KB path, as the import that broke last values
	cases := map[string]string{
		"":           "empty",
		"/a":         "segment 1 \"\": empty",
		"a/":         "segment 2 \"\": empty",
		"a//b":       "segment 2 \"\": empty",
		"a/+/b":      `character U+002B '+' is not allowed`,
		"a/#":        `character U+0023 '#' is not allowed`,
		"a\x00b":     "U+0000",
		"a/ b":       "begins or ends with a space",
		"a/b ":       "begins or ends with a space",
		"a/../b":     `"." and ".." are not names`,
		"a/./b":      `"." and ".." are not names`,
		"a:b":        `character U+003A ':' is not allowed`,
		"a\tb":       "U+0009",
		"a\xffb":     "invalid UTF-8",
		long:         "over the segment limit of 255",
		deep:         "more than 32 segments",
		huge:         "over the limit of 1024",
		"emoji/😀":    "U+1F600",
		"a/b\u200bc": "U+200B", // zero-width space: a format character, not a letter
	}
	for in, want := range cases {
		_, err := Clean(in)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("Clean(%q) = %v, want an error containing %q", show(in), err, want)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Errorf("Clean(%q): message of %d bytes; long paths must be shortened in messages", show(in), len(err.Error()))
		}
	}
}

func TestLimits_CountNFCBytes(t *testing.T) {
	// 127 'ü' are 254 bytes in NFC, 381 in NFD: the limit applies to NFC.
	seg := strings.Repeat("u\u0308", 127)
	if _, err := Clean(seg); err != nil {
		t.Fatalf("127 ü (254 bytes NFC): %v", err)
	}
	if _, err := Clean(seg + "üü"); err == nil {
		t.Fatal("129 ü (258 bytes NFC) accepted")
	}
	p := strings.Repeat(strings.Repeat("a", 99)+"/", 10) + strings.Repeat("a", 23) // 1023 bytes
	if _, err := Clean(p); err != nil {
		t.Fatalf("%d bytes: %v", len(p), err)
	}
	if _, err := Clean(p + "a"); err != nil {
		t.Fatalf("%d bytes: %v", len(p)+1, err)
	}
	if _, err := Clean(p + "aa"); err == nil {
		t.Fatalf("%d bytes accepted", len(p)+2)
	}
}

func TestCleanPrefix(t *testing.T) {
	for in, want := range map[string]string{"Line1": "Line1", "Line1/": "Line1/", "Ku\u0308hlung/": "Kühlung/"} {
		if got, err := CleanPrefix(in); err != nil || got != want {
			t.Errorf("CleanPrefix(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "/", "a//", "a/+"} {
		if _, err := CleanPrefix(in); err == nil {
			t.Errorf("CleanPrefix(%q) accepted", in)
		}
	}
}

func TestTopic_SegmentsAreLevels(t *testing.T) {
	base := "qubiq/v1/line1-edge-01/tags"
	got, err := Topic(base, "Halle 1/Kühlung/Vorlauf")
	if err != nil || got != base+"/Halle 1/Kühlung/Vorlauf" {
		t.Fatalf("Topic = %q, %v", got, err)
	}
	back, err := FromTopic(base, got)
	if err != nil || back != "Halle 1/Kühlung/Vorlauf" {
		t.Fatalf("FromTopic = %q, %v", back, err)
	}
	for _, bad := range []string{"a/+", "a/#", "a\x00", "a//b", "Ku\u0308hlung"} {
		if _, err := Topic(base, bad); err == nil {
			t.Errorf("Topic(%q) accepted", bad)
		}
	}
	if _, err := FromTopic(base, "other/x"); err == nil {
		t.Error("FromTopic accepted a topic outside base")
	}
	// Every character a valid segment may hold is allowed in a topic.
	for _, r := range "_-. aZ09ü²" {
		if strings.ContainsRune(TopicRefused, r) {
			t.Errorf("%q is both allowed in a path and refused in a topic", r)
		}
	}
}

// TestCheckTopicText_RefusesWhatBrokersRefuse: MQTT 3.1.1 §1.5.3 and
// Mosquitto refuse NUL, the C0 and C1 control characters and the
// noncharacters in a topic; letters of any script, spaces and U+FFFD
// itself pass. The error names the byte offset and the code point.
func TestCheckTopicText_RefusesWhatBrokersRefuse(t *testing.T) {
	for _, ok := range []string{"", "qubiq/v1/edge-01/reply/a1", "Halle 1/Kühlung", "温度", "a\uFFFDb", "\U0010FFFD", "~!$%&()"} {
		if err := CheckTopicText(ok); err != nil {
			t.Errorf("CheckTopicText(%q) = %v, want nil", ok, err)
		}
	}
	for in, want := range map[string]string{
		"a\x00b":         "byte 1: control character U+0000",
		"out/op\t1":      "byte 6: control character U+0009",
		"a\x1fb":         "byte 1: control character U+001F",
		"a\x7fb":         "byte 1: control character U+007F",
		"ab\u0085":       "byte 2: control character U+0085",
		"a\u009fb":       "byte 1: control character U+009F",
		"a\uFDD0":        "byte 1: noncharacter U+FDD0",
		"a\uFDEF":        "byte 1: noncharacter U+FDEF",
		"a\uFFFE":        "byte 1: noncharacter U+FFFE",
		"a\uffffb":       "byte 1: noncharacter U+FFFF",
		"\U0001FFFF":     "byte 0: noncharacter U+1FFFF",
		"\U0010FFFE":     "byte 0: noncharacter U+10FFFE",
		"ok/\xffx":       "byte 3: not UTF-8",
		"ok\xed\xa0\x80": "byte 2: not UTF-8", // a surrogate's encoding
	} {
		err := CheckTopicText(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckTopicText(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}
