package firmware

import "qubiq.dev/edge/firmware/qfw"

// The bundle format (manifest, signature, keys, build and verification)
// lives in package firmware/qfw, which links the standard library only so
// that qubiqctl's `firmware keygen|sign` can use it. These names keep
// firmware's own callers (the daemon's flash, qubiq-slot, packaging,
// backup) reading firmware.X; each is the qfw one, not a second home.
type (
	// BuildOptions is qfw.BuildOptions.
	BuildOptions = qfw.BuildOptions
	// File is qfw.File.
	File = qfw.File
	// Manifest is qfw.Manifest.
	Manifest = qfw.Manifest
	// SigningKey is qfw.SigningKey.
	SigningKey = qfw.SigningKey
	// TrustedKeys is qfw.TrustedKeys.
	TrustedKeys = qfw.TrustedKeys
)

// Limits, names and defaults of the bundle format (qfw).
const (
	MaxManifestSize    = qfw.MaxManifestSize
	MaxFiles           = qfw.MaxFiles
	MaxPathLen         = qfw.MaxPathLen
	DefaultTrustedKeys = qfw.DefaultTrustedKeys
	Format             = qfw.Format
	Product            = qfw.Product
)

// Errors of the bundle format (qfw), matched with errors.Is.
var (
	ErrFormat      = qfw.ErrFormat
	ErrUnknownKey  = qfw.ErrUnknownKey
	ErrSignature   = qfw.ErrSignature
	ErrHash        = qfw.ErrHash
	ErrDowngrade   = qfw.ErrDowngrade
	ErrArch        = qfw.ErrArch
	ErrTooLarge    = qfw.ErrTooLarge
	ErrBusy        = qfw.ErrBusy
	ErrUpgradePath = qfw.ErrUpgradePath
)

// Functions of the bundle format (qfw); see each there.
var (
	BundleName       = qfw.BundleName
	CompareVersions  = qfw.CompareVersions
	Keygen           = qfw.Keygen
	KeygenFile       = qfw.KeygenFile
	Kind             = qfw.Kind
	Build            = qfw.Build
	Inspect          = qfw.Inspect
	Resign           = qfw.Resign
	SignFile         = qfw.SignFile
	SlotManifest     = qfw.SlotManifest
	Verify           = qfw.Verify
	LoadSigningKey   = qfw.LoadSigningKey
	ParseSigningKey  = qfw.ParseSigningKey
	LoadTrustedKeys  = qfw.LoadTrustedKeys
	ParseTrustedKeys = qfw.ParseTrustedKeys
)
