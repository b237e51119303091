package opcua

import (
	"testing"

	"qubiq.dev/edge/value"
)

func TestStatusQuality_Table(t *testing.T) {
	for _, tc := range []struct {
		code uint32
		want value.Quality
		name string
	}{
		{0x00000000, value.Good, "Good"},
		{0x00300000, value.Good, "GoodClamped"},
		{0x00000400, value.Good, "Good"}, // info bits ignored
		{0x40000000, value.Uncertain, "Uncertain"},
		{0x40900000, value.UncertainLastUsableValue, "UncertainLastUsableValue"},
		{0x408F0000, value.UncertainLastUsableValue, "UncertainNoCommunicationLastUsableValue"},
		{0x40930000, value.Uncertain, "UncertainSensorNotAccurate"},
		{0x80340000, value.BadNodeIDUnknown, "BadNodeIdUnknown"},
		{0x80330000, value.BadNodeIDUnknown, "BadNodeIdInvalid"},
		{0x80350000, value.BadNodeIDUnknown, "BadAttributeIdInvalid"},
		{0x808A0000, value.BadNotConnected, "BadNotConnected"},
		{0x800D0000, value.BadNotConnected, "BadServerNotConnected"},
		{0x80310000, value.BadNotConnected, "BadNoCommunication"},
		{0x80250000, value.BadNotConnected, "BadSessionIdInvalid"},
		{0x80560000, value.BadNotConnected, "BadTooManySessions"},
		{0x800A0000, value.BadTimeout, "BadTimeout"},
		{0x80850000, value.BadTimeout, "BadRequestTimeout"},
		{0x801F0000, value.BadUserAccessDenied, "BadUserAccessDenied"},
		{0x803A0000, value.BadUserAccessDenied, "BadNotReadable"},
		{0x80210000, value.BadUserAccessDenied, "BadIdentityTokenRejected"},
		{0x803B0000, value.BadNotWritable, "BadNotWritable"},
		{0x80730000, value.BadNotWritable, "BadWriteNotSupported"},
		{0x80740000, value.BadTypeMismatch, "BadTypeMismatch"},
		{0x80110000, value.BadTypeMismatch, "BadDataTypeIdUnknown"},
		{0x803C0000, value.BadOutOfRange, "BadOutOfRange"},
		{0x80890000, value.BadConfigurationError, "BadConfigurationError"},
		{0x80550000, value.BadConfigurationError, "BadSecurityPolicyRejected"},
		{0x80440000, value.BadConfigurationError, "BadMonitoredItemFilterUnsupported"},
		{0x801A0000, value.BadCertificateUntrusted, "BadCertificateUntrusted"},
		{0x80140000, value.BadCertificateUntrusted, "BadCertificateTimeInvalid"},
		{0x80130000, value.BadCertificateUntrusted, "BadSecurityChecksFailed"},
		{0x808B0000, value.BadDeviceFailure, "BadDeviceFailure"},
		{0x808C0000, value.BadDeviceFailure, "BadSensorFailure"},
		{0x80320000, value.BadWaitingForInitialData, "BadWaitingForInitialData"},
		{0x80050000, value.BadCommunicationError, "BadCommunicationError"},
		{0x80020000, value.BadCommunicationError, "BadInternalError"}, // unlisted Bad
		{0x8FFF0000, value.BadCommunicationError, "0x8FFF0000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StatusQuality(tc.code); got != tc.want {
				t.Errorf("StatusQuality(0x%08X) = %s, want %s", tc.code, got, tc.want)
			}
			if got := StatusName(tc.code); got != tc.name {
				t.Errorf("StatusName(0x%08X) = %q, want %q", tc.code, got, tc.name)
			}
		})
	}
}

// Every entry of the table maps onto a quality name of the contract.
func TestStatusQuality_TableUsesContractNames(t *testing.T) {
	for code, q := range statusQuality {
		if _, err := value.ParseQuality(q.String()); err != nil {
			t.Errorf("0x%08X maps to %v, not a contract quality", uint32(code), q)
		}
		if uint32(code)&0xFFFF != 0 {
			t.Errorf("0x%08X has info bits set in the table", uint32(code))
		}
	}
}
