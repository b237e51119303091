package opcua

// standardDataTypes names the DataTypes of namespace 0 a variable of a
// device commonly has, by numeric id, as OPC UA Part 6 (NodeIds.csv) and
// Part 3 §8 and Part 5 §12 name them. A browse shows these names; another
// DataType shows its address. The table is the daemon's own rather than
// gopcua's id.Name, whose name maps of every node of namespace 0 would be
// built at start and kept (about 2 MiB of heap, docs/config.md "memory")
// for a browse that may never come; TestStandardDataTypes_MatchTheNodeSet
// holds it to gopcua's generated ids.
var standardDataTypes = map[uint32]string{
	1: "Boolean", 2: "SByte", 3: "Byte", 4: "Int16", 5: "UInt16", 6: "Int32", 7: "UInt32", 8: "Int64", 9: "UInt64",
	10: "Float", 11: "Double", 12: "String", 13: "DateTime", 14: "Guid", 15: "ByteString", 16: "XmlElement",
	17: "NodeId", 18: "ExpandedNodeId", 19: "StatusCode", 20: "QualifiedName", 21: "LocalizedText", 22: "Structure",
	23: "DataValue", 24: "BaseDataType", 25: "DiagnosticInfo", 26: "Number", 27: "Integer", 28: "UInteger",
	29: "Enumeration", 30: "Image", 50: "Decimal",
	256: "IdType", 257: "NodeClass", 288: "IntegerId", 289: "Counter", 290: "Duration", 291: "NumericRange",
	294: "UtcTime", 295: "LocaleId", 296: "Argument", 302: "MessageSecurityMode", 307: "ApplicationType", 338: "BuildInfo",
	851: "RedundancySupport", 852: "ServerState", 862: "ServerStatusDataType", 884: "Range", 887: "EUInformation",
	2000: "ImageBMP", 2001: "ImageGIF", 2002: "ImageJPG", 2003: "ImagePNG",
	7594: "EnumValueType", 8912: "TimeZoneDataType", 11737: "BitFieldMaskDataType", 12079: "AxisInformation",
	12080: "XVType", 12171: "ComplexNumberType", 12172: "DoubleComplexNumberType", 12755: "OptionSet", 12756: "Union",
	12877: "NormalizedString", 12878: "DecimalString", 12879: "DurationString", 12880: "TimeString", 12881: "DateString",
	14533: "KeyValuePair", 16307: "AudioDataType", 17588: "Index", 20998: "VersionTime",
}
