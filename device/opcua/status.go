package opcua

import (
	"fmt"
	"strings"

	"github.com/gopcua/opcua/ua"

	"qubiq.dev/edge/value"
)

// statusQuality is THE table from OPC UA status codes (Part 4 §7.34, Part 6
// Annex A) to the contract's quality names (docs/project.md, Quality). Codes are
// looked up without their info bits (the low 16 bits). A Good code not here
// is Good; an Uncertain one Uncertain; a Bad one Bad_CommunicationError.
var statusQuality = map[ua.StatusCode]value.Quality{
	ua.StatusUncertainLastUsableValue:                value.UncertainLastUsableValue,
	ua.StatusUncertainNoCommunicationLastUsableValue: value.UncertainLastUsableValue,

	ua.StatusBadWaitingForInitialData: value.BadWaitingForInitialData,

	ua.StatusBadNodeIDUnknown:      value.BadNodeIDUnknown,
	ua.StatusBadNodeIDInvalid:      value.BadNodeIDUnknown,
	ua.StatusBadAttributeIDInvalid: value.BadNodeIDUnknown,
	ua.StatusBadNodeClassInvalid:   value.BadNodeIDUnknown,

	ua.StatusBadNotConnected:          value.BadNotConnected,
	ua.StatusBadServerNotConnected:    value.BadNotConnected,
	ua.StatusBadNoCommunication:       value.BadNotConnected,
	ua.StatusBadConnectionClosed:      value.BadNotConnected,
	ua.StatusBadConnectionRejected:    value.BadNotConnected,
	ua.StatusBadSecureChannelClosed:   value.BadNotConnected,
	ua.StatusBadSessionClosed:         value.BadNotConnected,
	ua.StatusBadSessionIDInvalid:      value.BadNotConnected,
	ua.StatusBadSessionNotActivated:   value.BadNotConnected,
	ua.StatusBadServerHalted:          value.BadNotConnected,
	ua.StatusBadShutdown:              value.BadNotConnected,
	ua.StatusBadTooManySessions:       value.BadNotConnected,
	ua.StatusBadMaxConnectionsReached: value.BadNotConnected,
	ua.StatusBadTCPServerTooBusy:      value.BadNotConnected,

	ua.StatusBadTimeout:            value.BadTimeout,
	ua.StatusBadRequestTimeout:     value.BadTimeout,
	ua.StatusBadWaitingForResponse: value.BadTimeout,

	ua.StatusBadUserAccessDenied:      value.BadUserAccessDenied,
	ua.StatusBadNotReadable:           value.BadUserAccessDenied,
	ua.StatusBadIdentityTokenInvalid:  value.BadUserAccessDenied,
	ua.StatusBadIdentityTokenRejected: value.BadUserAccessDenied,
	ua.StatusBadUserSignatureInvalid:  value.BadUserAccessDenied,

	ua.StatusBadNotWritable:       value.BadNotWritable,
	ua.StatusBadWriteNotSupported: value.BadNotWritable,

	ua.StatusBadTypeMismatch:            value.BadTypeMismatch,
	ua.StatusBadDataTypeIDUnknown:       value.BadTypeMismatch,
	ua.StatusBadDataEncodingInvalid:     value.BadTypeMismatch,
	ua.StatusBadDataEncodingUnsupported: value.BadTypeMismatch,

	ua.StatusBadOutOfRange:        value.BadOutOfRange,
	ua.StatusBadIndexRangeInvalid: value.BadOutOfRange,
	ua.StatusBadIndexRangeNoData:  value.BadOutOfRange,

	ua.StatusBadConfigurationError:                 value.BadConfigurationError,
	ua.StatusBadSecurityPolicyRejected:             value.BadConfigurationError,
	ua.StatusBadSecurityModeRejected:               value.BadConfigurationError,
	ua.StatusBadSecurityModeInsufficient:           value.BadConfigurationError,
	ua.StatusBadMonitoredItemFilterInvalid:         value.BadConfigurationError,
	ua.StatusBadMonitoredItemFilterUnsupported:     value.BadConfigurationError,
	ua.StatusBadFilterNotAllowed:                   value.BadConfigurationError,
	ua.StatusBadDeadbandFilterInvalid:              value.BadConfigurationError,
	ua.StatusBadMonitoringModeInvalid:              value.BadConfigurationError,
	ua.StatusBadTCPEndpointURLInvalid:              value.BadConfigurationError,
	ua.StatusBadTooManyMonitoredItems:              value.BadConfigurationError,
	ua.StatusBadTooManySubscriptions:               value.BadConfigurationError,
	ua.StatusBadCertificateUntrusted:               value.BadCertificateUntrusted,
	ua.StatusBadCertificateInvalid:                 value.BadCertificateUntrusted,
	ua.StatusBadCertificateTimeInvalid:             value.BadCertificateUntrusted,
	ua.StatusBadCertificateIssuerTimeInvalid:       value.BadCertificateUntrusted,
	ua.StatusBadCertificateHostNameInvalid:         value.BadCertificateUntrusted,
	ua.StatusBadCertificateURIInvalid:              value.BadCertificateUntrusted,
	ua.StatusBadCertificateUseNotAllowed:           value.BadCertificateUntrusted,
	ua.StatusBadCertificateIssuerUseNotAllowed:     value.BadCertificateUntrusted,
	ua.StatusBadCertificateRevocationUnknown:       value.BadCertificateUntrusted,
	ua.StatusBadCertificateIssuerRevocationUnknown: value.BadCertificateUntrusted,
	ua.StatusBadCertificateRevoked:                 value.BadCertificateUntrusted,
	ua.StatusBadCertificateIssuerRevoked:           value.BadCertificateUntrusted,
	ua.StatusBadCertificateChainIncomplete:         value.BadCertificateUntrusted,
	ua.StatusBadCertificatePolicyCheckFailed:       value.BadCertificateUntrusted,
	ua.StatusBadSecurityChecksFailed:               value.BadCertificateUntrusted,
	ua.StatusBadNoValidCertificates:                value.BadCertificateUntrusted,

	ua.StatusBadDeviceFailure: value.BadDeviceFailure,
	ua.StatusBadSensorFailure: value.BadDeviceFailure,
	ua.StatusBadOutOfService:  value.BadDeviceFailure,
}

// Severity of a status code: its two top bits (Part 4 §7.34.1).
const (
	severityMask      ua.StatusCode = 0xC0000000
	severityUncertain ua.StatusCode = 0x40000000
	codeMask          ua.StatusCode = 0xFFFF0000
)

// StatusQuality maps an OPC UA status code to the contract's quality through
// the package's one table (statusQuality). The info bits (low 16 bits) are
// ignored.
func StatusQuality(code uint32) value.Quality {
	c := ua.StatusCode(code) & codeMask
	if q, ok := statusQuality[c]; ok {
		return q
	}
	switch c & severityMask {
	case 0:
		return value.Good
	case severityUncertain:
		return value.Uncertain
	}
	return value.BadCommunicationError
}

// StatusName returns the specification name of a status code
// ("BadNodeIdUnknown"), or its hexadecimal value when unknown.
func StatusName(code uint32) string {
	c := ua.StatusCode(code) & codeMask
	if d, ok := ua.StatusCodes[c]; ok {
		return specName(d.Name)
	}
	return fmt.Sprintf("0x%08X", code)
}

// specName turns gopcua's generated names ("StatusBadNodeIDUnknown") into the
// specification's ("BadNodeIdUnknown").
func specName(n string) string {
	n = strings.TrimPrefix(n, "Status")
	n = strings.ReplaceAll(n, "ID", "Id")
	n = strings.ReplaceAll(n, "TCP", "Tcp")
	n = strings.ReplaceAll(n, "URI", "Uri")
	if n == "OK" {
		return "Good"
	}
	return n
}

// statusReason is the reason text of a VQT with status code c:
// "BadNodeIdUnknown (0x80340000)".
func statusReason(c ua.StatusCode) string {
	return fmt.Sprintf("%s (0x%08X)", StatusName(uint32(c)), uint32(c))
}
