package packages

import (
	"strings"
	"testing"
)

func TestParseRequirement_Forms(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"numpy", "numpy", true},
		{"NumPy==1.26.4", "numpy", true},
		{"paho_mqtt >= 1.6, < 2", "paho-mqtt", true},
		{"requests[socks]==2.31.0", "requests", true},
		{"pkg~=1.2", "pkg", true},
		{"pkg @ https://x/y.whl", "", false},
		{"-e .", "", false},
		{"./local.whl", "", false},
		{"pkg; python_version<'3.12'", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRequirement(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseRequirement(%q) = %q, %v", tt.in, got, err)
			}
		})
	}
}

func TestWidensOf_Table(t *testing.T) {
	tests := []struct {
		name   string
		native bool
		want   string
	}{
		{"numpy", true, "numpy.ctypeslib"},
		{"torch", true, "pickle"},
		{"joblib", false, "pickle"},
		{"pandas", true, "any path"},
		{"requests", false, "network"},
		{"urllib3", false, "network"},
		{"httpx", false, "network"},
		{"paho-mqtt", false, "network"},
		{"paho_mqtt", false, "network"},
		{"qubiq-testpkg", false, GenericWidening},
		{"something-native", true, NativeWidening},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := widensOf(tt.name, tt.native)
			if !strings.Contains(strings.Join(w, "|"), tt.want) || w[len(w)-1] != GenericWidening {
				t.Errorf("widensOf(%s) = %v, want one naming %q and the generic warning", tt.name, w, tt.want)
			}
		})
	}
}
