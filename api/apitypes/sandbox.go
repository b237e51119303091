package apitypes

import (
	"encoding/json"
	"time"
)

// The wire types of the script sandbox's administration (docs/api.md, REST,
// "/sandbox/... (config, packages, upload, check) | sandbox_admin"). Every
// route needs the sandbox_admin permission, reads included.

// NDJSONContentType is the media type of the streamed answers of package
// installs: one PackageEvent per line.
const NDJSONContentType = "application/x-ndjson"

// PackageInstallRequest is the body of POST /api/v1/sandbox/packages:
// Requirement is "name", "name==1.2" or another version specifier (no URL,
// path or option); AcknowledgeWidening must be true or the install is
// refused with 409 and the list of what the package widens
// (WideningProblem).
type PackageInstallRequest struct {
	Requirement         string `json:"requirement"`
	AcknowledgeWidening bool   `json:"acknowledge_widening"`
}

// SandboxPackage is one installed distribution (GET
// /api/v1/sandbox/packages): its name and version, its top-level import
// names (which scripts may import), whether an administrator requested it
// (else it came as a dependency) and how (Requirement; Source "index" or
// "upload"; InstalledBy, the principal; InstalledAt), whether it has
// compiled code, and what it widens.
type SandboxPackage struct {
	Name        string     `json:"name"`
	Version     string     `json:"version"`
	Imports     []string   `json:"imports"`
	Requested   bool       `json:"requested"`
	Requirement string     `json:"requirement,omitempty"`
	Source      string     `json:"source,omitempty"`
	InstalledBy string     `json:"installed_by,omitempty"`
	InstalledAt *time.Time `json:"installed_at,omitempty"`
	Native      bool       `json:"native"`
	Widens      []string   `json:"widens"`
}

// PackageWidening is what one package of an install brings to scripts
// (docs/security.md, "The script sandbox"): numpy's ctypes, torch's and joblib's pickle loaders,
// pandas reading any path, the network clients, and a generic warning for
// every package.
type PackageWidening struct {
	Package   string   `json:"package"`
	Version   string   `json:"version,omitempty"`
	Requested bool     `json:"requested"`
	Imports   []string `json:"imports,omitempty"`
	Widens    []string `json:"widens"`
}

// PackageChange is the result of an install or removal: the action
// ("install", "remove"), the packages asked for, every package installed
// now, the import names scripts may use now, what the new packages widen,
// and how long it took (workers restarted included).
type PackageChange struct {
	Action     string            `json:"action"`
	Packages   []string          `json:"packages"`
	Installed  []SandboxPackage  `json:"installed"`
	Allowed    []string          `json:"allowed"`
	Widenings  []PackageWidening `json:"widenings,omitempty"`
	DurationMS int64             `json:"duration_ms"`
}

// Package event kinds, in order: any number of progress events, then one
// done or one error.
const (
	PackageEventProgress = "progress"
	PackageEventDone     = "done"
	PackageEventError    = "error"
)

// PackageEvent is one line of the NDJSON answer of an acknowledged install
// (POST /sandbox/packages, POST /sandbox/packages/upload). Event is
// "progress" (Step: "download", "resolve", "install", "swap", "restart" or
// "pip" with a line of pip's output in Message), "done" (Result) or
// "error" (Error, a problem document: the install failed and nothing
// changed).
type PackageEvent struct {
	Event   string         `json:"event"`
	Step    string         `json:"step,omitempty"`
	Message string         `json:"message,omitempty"`
	Result  *PackageChange `json:"result,omitempty"`
	Error   *Problem       `json:"error,omitempty"`
}

// WideningProblem is the 409 answer to an install without
// acknowledge_widening: a problem document (kind
// "acknowledgement_required") with every package the install would bring
// and what it widens.
type WideningProblem struct {
	Problem
	Widenings []PackageWidening `json:"widenings"`
}

// IndexCheck is the answer of GET /api/v1/sandbox/check: can pip reach
// python.index_url. URL is the page asked (<index_url>/pip/, PEP 503),
// Reachable whether it answered like an index, Status the HTTP status,
// DurationMS how long it took, Reason why not ("connection refused", "no
// answer within 4s", "HTTP 404: ...", "python.index_url is empty:
// offline ..."). Answered within a few seconds.
type IndexCheck struct {
	IndexURL   string  `json:"index_url"`
	URL        string  `json:"url,omitempty"`
	Reachable  bool    `json:"reachable"`
	Status     int     `json:"status,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	Reason     string  `json:"reason,omitempty"`
}

// SandboxConfig is the answer of GET /api/v1/sandbox/config, an object
// whose keys the sandbox defines (python, python_path, pip, mode,
// replicas, queue, gateway_timeout_ms, node_timeout_ms, memory_max,
// pids_max, cpu_max, recycle_after_runs, recycle_above_memory,
// hardening_config, hardening, index_url, packages_dir, allowed,
// installed, linter, linter_path), passed through unchanged.
type SandboxConfig = json.RawMessage
