package all_test

import (
	"testing"

	"qubiq.dev/edge/device"
	_ "qubiq.dev/edge/device/all"
)

func TestAll_Registers(t *testing.T) {
	for _, name := range []string{"modbus", "sim"} {
		if _, ok := device.Lookup(name); !ok {
			t.Errorf("driver %q is not registered", name)
		}
	}
}
