package api

import (
	at "qubiq.dev/edge/api/apitypes"
)

// The appliance's routes in the OpenAPI document (routes_firmware.go).
func init() {
	for pattern, op := range map[string]opSpec{
		"POST /api/v1/firmware": {summary: "Flash a signed firmware bundle (.qfw): verified, staged for the inactive slot; the daemon restarts into it, on trial",
			reqMedia: "application/octet-stream", resp: at.FlashResult{}, query: []string{"force: true allows a downgrade (never another architecture)"}},
		"GET /api/v1/firmware": {summary: "The A/B firmware slots: the active one, a trial, the last results, an upload in progress", resp: at.FirmwareStatus{}},
		"POST /api/v1/backup": {summary: "Stream a backup (store snapshot, project, files, trusted certificates, secrets key; every entry hashed); header " +
			at.PassphraseHeader + " seals the secrets key", respMedia: "application/octet-stream"},
		"POST /api/v1/restore": {summary: "Check and stage a backup; the daemon restarts and restores it before its store opens; header " +
			at.PassphraseHeader + " opens sealed secrets", reqMedia: "application/octet-stream", resp: at.RestoreStaged{},
			query: []string{"keep_credentials: true carries the old appliance's API keys and sessions"}},
		"GET /api/v1/log-level": {summary: "The daemon's log level", resp: at.LogLevel{}},
		"PUT /api/v1/log-level": {summary: "Change the daemon's log level until the next start (debug, info, warn, error)", req: at.LogLevel{}, resp: at.LogLevel{}},
	} {
		openapiOps[pattern] = op
	}
}
