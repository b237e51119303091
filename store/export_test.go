package store

// EncodeVQTForTest and AppendVQTForTest expose the two record encoders to
// the external tests, which compare them.
var (
	EncodeVQTForTest = encodeVQT
	AppendVQTForTest = appendVQT
)
