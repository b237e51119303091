package opcua

import (
	"testing"

	"qubiq.dev/edge/internal/peers"
)

// uaServer is the node-opcua 2.160.0 test server (testdata/server.js),
// started by the shared peer harness: a third-party server nobody here
// wrote, on a free loopback port, failing the test loudly when node or npm
// cannot run it.
type uaServer = peers.OPCUA

func freePort(t testing.TB) int { return peers.FreePort(t) }

// startServer starts server.js on a free loopback port with its own PKI
// folder and args, and stops it at the end of the test.
func startServer(t testing.TB, args ...string) *uaServer { return peers.StartOPCUA(t, args...) }
