package client

import (
	"context"
	"net/http"

	"qubiq.dev/edge/api/apitypes"
)

// ListDeviceCerts calls GET /api/v1/devices/{name}/certs (designer): the
// certificates of an OPC UA device's store, trusted, rejected and qubiqd's
// own. An unknown device is a *ProblemError with Status 404, a device
// without a certificate store (not OPC UA) 400.
func (c *Client) ListDeviceCerts(ctx context.Context, device string) ([]apitypes.DeviceCert, error) {
	var out []apitypes.DeviceCert
	err := c.do(ctx, http.MethodGet, path("devices", device, "certs"), nil, &out)
	return nonNil(out), err
}

// TrustDeviceCert calls POST /api/v1/devices/{name}/certs/{thumbprint}/trust
// (designer): the server certificate moves from rejected to trusted and the
// device connects with it at once. It returns the certificate with its new
// status; an unknown thumbprint is a *ProblemError with Status 404.
func (c *Client) TrustDeviceCert(ctx context.Context, device, thumbprint string) (apitypes.DeviceCert, error) {
	var out apitypes.DeviceCert
	err := c.do(ctx, http.MethodPost, path("devices", device, "certs", thumbprint, "trust"), nil, &out)
	return out, err
}

// RejectDeviceCert calls POST /api/v1/devices/{name}/certs/{thumbprint}/reject
// (designer): the certificate moves from trusted to rejected and the device
// refuses the server at its next connection.
func (c *Client) RejectDeviceCert(ctx context.Context, device, thumbprint string) (apitypes.DeviceCert, error) {
	var out apitypes.DeviceCert
	err := c.do(ctx, http.MethodPost, path("devices", device, "certs", thumbprint, "reject"), nil, &out)
	return out, err
}
