package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"qubiq.dev/edge/api/apitypes"
)

// InvalidProjectError is the 400 answer to a refused project or tag import
// (apitypes.InvalidProjectProblem): every problem with its line; nothing
// was applied. It unwraps to the *ProblemError (Kind "invalid", Detail
// the messages one per line).
type InvalidProjectError struct {
	*ProblemError
	Errors []apitypes.ProjectProblem
}

// Unwrap returns the problem.
func (e *InvalidProjectError) Unwrap() error { return e.ProblemError }

// ImportProject calls POST /api/v1/project/import (designer) with doc, a
// project file (YAML or JSON): the daemon validates it as --check-config
// does and applies it without a restart. A refused project is an
// *InvalidProjectError listing every problem.
func (c *Client) ImportProject(ctx context.Context, doc []byte) (apitypes.ProjectChanges, error) {
	var out apitypes.ProjectChanges
	err := c.send(ctx, http.MethodPost, path("project", "import"), apitypes.YAMLContentType, doc, &out, nil)
	return out, err
}

// ExportProject calls GET /api/v1/project/export (designer): the running
// project file (YAML).
func (c *Client) ExportProject(ctx context.Context) ([]byte, error) {
	var out []byte
	err := c.send(ctx, http.MethodGet, path("project", "export"), "", nil, nil, &out)
	return out, err
}

// ImportTags calls POST /api/v1/tags/import?format=FORMAT (designer): the
// tags of doc (format "csv" or "yaml") are upserted into the project by
// path, all or nothing. A refused file is an *InvalidProjectError naming
// each bad row's line.
func (c *Client) ImportTags(ctx context.Context, format string, doc []byte) (apitypes.ProjectChanges, error) {
	ct := apitypes.YAMLContentType
	if format == "csv" {
		ct = apitypes.CSVContentType
	}
	var out apitypes.ProjectChanges
	err := c.send(ctx, http.MethodPost, path("tags", "import")+"?format="+url.QueryEscape(format), ct, doc, &out, nil)
	return out, err
}

// ExportTags calls GET /api/v1/tags/export?format=FORMAT (designer): the
// project's tags as a CSV or YAML tag file, which ImportTags takes back.
func (c *Client) ExportTags(ctx context.Context, format string) ([]byte, error) {
	var out []byte
	err := c.send(ctx, http.MethodGet, path("tags", "export")+"?format="+url.QueryEscape(format), "", nil, nil, &out)
	return out, err
}

// BrowseDevice calls GET /api/v1/devices/{name}/browse?node=NODE
// (tag:read): the children of node ("" the root, the Objects folder for
// OPC UA). An unknown device or node is a *ProblemError with Status 404; a
// driver that cannot browse 400; a device that cannot answer now 503.
func (c *Client) BrowseDevice(ctx context.Context, name, node string) ([]apitypes.BrowseNode, error) {
	p := path("devices", name, "browse")
	if node != "" {
		p += "?node=" + url.QueryEscape(node)
	}
	var out []apitypes.BrowseNode
	err := c.send(ctx, http.MethodGet, p, "", nil, &out, nil)
	return out, err
}

// send is do for documents: body sent as is with contentType (none when
// body is nil); a 2xx answer decoded as JSON into out, or kept as bytes in
// raw. A 400 InvalidProjectProblem becomes an *InvalidProjectError.
func (c *Client) send(ctx context.Context, method, p, contentType string, body []byte, out any, raw *[]byte) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+p, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, p, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if raw != nil {
		req.Header.Set("Accept", "*/*")
	} else {
		req.Header.Set("Accept", "application/json, application/problem+json")
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, p, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		perr := problem(resp, rb)
		var pe *ProblemError
		var ip apitypes.InvalidProjectProblem
		if errors.As(perr, &pe) && resp.StatusCode == http.StatusBadRequest && json.Unmarshal(rb, &ip) == nil && len(ip.Errors) > 0 {
			return &InvalidProjectError{ProblemError: pe, Errors: ip.Errors}
		}
		return perr
	}
	if raw != nil {
		*raw = rb
		return nil
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, p, err)
	}
	return nil
}
