package api

import "qubiq.dev/edge/auth"

// certRoutes manage the certificate store of an OPC UA device
// (testdata/routes.md: "/devices/{name}/certs... (trust, reject) |
// designer"): the list, and moving a server certificate between pki/rejected and
// pki/trusted. Every one needs the designer permission, the list included
// (it shows which servers the appliance talks to). They answer 501 when
// Deps.Certs is nil (certs.go). routes.go's table gets them through the
// init below, so the middleware enforces their rows like every other's and
// routes_test.go checks them against the contract's route table
// (testdata/routes.md).
var certRoutes = []route{
	{method: "GET", path: prefix + "/devices/{name}/certs", need: perm(auth.Designer), handle: (*Server).listCerts},
	{method: "POST", path: prefix + "/devices/{name}/certs/{thumbprint}/trust", need: perm(auth.Designer), handle: (*Server).trustCert},
	{method: "POST", path: prefix + "/devices/{name}/certs/{thumbprint}/reject", need: perm(auth.Designer), handle: (*Server).rejectCert},
}

func init() { routes = append(routes, certRoutes...) }
