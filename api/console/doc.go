// Package console is the engineer's web console of QUBIQ Edge: the pages an
// administrator, a script designer and a user administrator use beside the
// operators' LiveView panels (docs/console.md). It holds the console's
// assets, embedded in the binary so that it works air-gapped, and serves
// them; package api mounts Handler at /console/.
//
// The console is a front door made of REST calls only: every action it
// offers is a route of api's route table, called with the browser
// session's cookie, its CSRF token and the X-Qubiq-Console header. Nothing
// here reads or changes the appliance.
//
// # Assets and the build
//
// static/ holds the hand-written files (index.html, console.css, the page
// shown when the bundle is missing). src/ holds the JavaScript, which
// esbuild bundles with CodeMirror 6 (npm packages pinned in package.json
// and package-lock.json) into dist/console.js; `make console` runs `npm ci`
// and esbuild, and `make build`, `make run` and `make test` run it before
// `go build`. dist/ is committed with a README only, so a plain
// `go build ./...` compiles without Node.js: such a binary serves a page
// that says the bundle is missing (Built reports it).
//
// src/needs.json names the permission or scope each route the console
// calls needs, as the console shows it on a refusal; api's tests check it
// against the route table.
package console
