package systemd

import (
	"fmt"
	"strings"
)

// SerialDropInPath is where the serial-port drop-in goes on the appliance
// (systemd.unit(5), "drop-in" directories). Run `systemctl daemon-reload`
// and restart qubiqd after writing it.
const SerialDropInPath = "/etc/systemd/system/qubiqd.service.d/50-serial.conf"

// SerialDropIn returns the drop-in that opens serial ports to qubiqd for
// Modbus RTU: the unit keeps PrivateDevices=yes (no physical device
// visible) by default, and this turns it off while DevicePolicy=closed with
// one DeviceAllow= per port keeps every other device out, and adds the
// dialout group that owns serial ports on Debian (and turns PrivateUsers=
// off: systemd 252 maps only the service's own user and group into it, so
// setgroups(dialout) would fail). devices are device paths
// (/dev/ttyUSB0, /dev/serial/by-id/...) or device groups in DeviceAllow=
// syntax (char-ttyUSB: every USB serial adapter, which survives
// re-enumeration). An empty list, or an entry that is neither, is an error
// naming it.
func SerialDropIn(devices []string) (string, error) {
	if len(devices) == 0 {
		return "", fmt.Errorf("systemd: serial drop-in: no device given")
	}
	var b strings.Builder
	b.WriteString("# Serial ports for Modbus RTU (docs/appliance.md, \"Serial ports\").\n")
	b.WriteString("# Written by `qubiq-slot serial-dropin`; run `systemctl daemon-reload` after changing it.\n")
	b.WriteString("[Service]\nPrivateDevices=no\nDevicePolicy=closed\nSupplementaryGroups=dialout\nPrivateUsers=no\n")
	for _, d := range devices {
		ok := (strings.HasPrefix(d, "/dev/") || strings.HasPrefix(d, "char-")) &&
			!strings.ContainsAny(d, " \t\r\n\"'\\") && !strings.Contains(d, "..")
		if !ok {
			return "", fmt.Errorf("systemd: serial drop-in: %q is not a device path under /dev/ nor a char- device group", d)
		}
		fmt.Fprintf(&b, "DeviceAllow=%s rw\n", d)
	}
	return b.String(), nil
}
