package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"qubiq.dev/edge/api"
	"qubiq.dev/edge/auth"
	"qubiq.dev/edge/client"
	"qubiq.dev/edge/gateway"
)

type projectAuth struct{}

func (projectAuth) Authenticate(context.Context, string) (auth.Grant, error) {
	return auth.Full("d", auth.RealmAPIKey, "test"), nil
}

// memProject keeps the last document imported; a document holding "bad"
// is refused with two problems.
type memProject struct{ doc, format string }

func (m *memProject) ImportProject(_ context.Context, _ auth.Grant, doc []byte) (gateway.ProjectChanges, error) {
	return m.ImportTags(context.Background(), auth.Grant{}, "project", doc)
}

func (m *memProject) ExportProject(context.Context) ([]byte, error) { return []byte(m.doc), nil }

func (m *memProject) ImportTags(_ context.Context, _ auth.Grant, format string, doc []byte) (gateway.ProjectChanges, error) {
	if strings.Contains(string(doc), "bad") {
		return gateway.ProjectChanges{}, &api.ProjectError{Problems: []gateway.Problem{
			{Line: 2, Message: "line 2: bad scale"}, {Line: 5, Message: "line 5: bad device"}}}
	}
	m.doc, m.format = string(doc), format
	return gateway.ProjectChanges{Tags: gateway.ChangeSet{Added: []string{"A"}}}, nil
}

func (m *memProject) ExportTags(_ context.Context, format string) ([]byte, error) {
	return []byte(format + ":" + m.doc), nil
}

func (m *memProject) BrowseDevice(_ context.Context, _ auth.Grant, name, node string) ([]gateway.BrowseNode, error) {
	if name != "ua" {
		return nil, api.ErrNotFound
	}
	return []gateway.BrowseNode{{NodeID: node + "/x", BrowseName: "x", NodeClass: "Object"}}, nil
}

func newProjectClient(t *testing.T) (*client.Client, *memProject) {
	t.Helper()
	mp := &memProject{}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0"}, api.Deps{Auth: projectAuth{}, Project: mp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	c, err := client.New(hs.URL, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, mp
}

func TestClient_ImportExport_RoundTrip(t *testing.T) {
	c, mp := newProjectClient(t)
	ctx := context.Background()
	ch, err := c.ImportTags(ctx, "csv", []byte("path,device,address\nA,sim,memory\n"))
	if err != nil || len(ch.Tags.Added) != 1 || ch.Tags.Changed == nil || ch.RestartRequired == nil {
		t.Fatalf("ImportTags = %+v, %v", ch, err)
	}
	if mp.format != "csv" {
		t.Fatalf("format %q", mp.format)
	}
	out, err := c.ExportTags(ctx, "yaml")
	if err != nil || string(out) != "yaml:path,device,address\nA,sim,memory\n" {
		t.Fatalf("ExportTags = %q, %v", out, err)
	}
	if _, err := c.ImportProject(ctx, []byte("devices: []\n")); err != nil {
		t.Fatal(err)
	}
	if out, err := c.ExportProject(ctx); err != nil || string(out) != "devices: []\n" {
		t.Fatalf("ExportProject = %q, %v", out, err)
	}
	nodes, err := c.BrowseDevice(ctx, "ua", "ns=2;s=A B")
	if err != nil || len(nodes) != 1 || nodes[0].NodeID != "ns=2;s=A B/x" {
		t.Fatalf("BrowseDevice = %+v, %v", nodes, err)
	}
	var pe *client.ProblemError
	if _, err := c.BrowseDevice(ctx, "plc", ""); !errors.As(err, &pe) || pe.Status != http.StatusNotFound {
		t.Fatalf("unknown device: %v", err)
	}
}

func TestClient_ImportTags_InvalidProjectError(t *testing.T) {
	c, _ := newProjectClient(t)
	_, err := c.ImportTags(context.Background(), "csv", []byte("bad"))
	var ie *client.InvalidProjectError
	if !errors.As(err, &ie) || len(ie.Errors) != 2 || ie.Errors[1].Line != 5 || ie.Status != 400 || !client.IsKind(err, "invalid") {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), "line 2: bad scale\nline 5: bad device") {
		t.Fatalf("message %q", err.Error())
	}
}
