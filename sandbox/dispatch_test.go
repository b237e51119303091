package sandbox

import (
	"context"
	"encoding/json"
	"testing"

	"qubiq.dev/edge/auth"
)

// auditingServices records the refusals the dispatcher reports.
type auditingServices struct {
	*fakeServices
	refused []string
}

func (a *auditingServices) AuditRefusal(g auth.Grant, method string, reason error) {
	a.refused = append(a.refused, g.Principal+" "+method+": "+reason.Error())
}

// Every call the dispatcher refuses itself is reported once to a
// RefusalAuditor, so the daemon audits it; allowed calls are not.
func TestPool_Dispatch_RefusalsAudited(t *testing.T) {
	svc := &auditingServices{fakeServices: newFakeServices()}
	p, err := New(testConfig(t), svc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	reader := auth.Grant{Principal: "kiosk", Realm: auth.RealmAnonymous, Scopes: auth.ReadScopes}
	for _, raw := range []string{
		`{"type":"call","exec":"e1","id":1,"method":"tag.write","params":{"paths":["Line1/Pump/Setpoint"],"values":[1]}}`,
		`{"type":"call","exec":"e1","id":2,"method":"os.system","params":{}}`,
		`{"type":"call","exec":"e1","id":3,"method":"tag.read","params":{"paths":["Line1/Pump/Speed"]}}`,
	} {
		p.dispatch(context.Background(), reader, "m.f", decodeCall(t, raw))
	}
	if len(svc.refused) != 2 || svc.refused[0][:16] != "kiosk tag.write:" || svc.refused[1][:16] != "kiosk os.system:" {
		t.Errorf("refusals %q", svc.refused)
	}
}

// taggedServices answers vars.get with the tagged values of METHODS.md and
// records the params of vars.set.
type taggedServices struct {
	*fakeServices
	setParams string
}

func (s *taggedServices) Call(ctx context.Context, g auth.Grant, method string, params json.RawMessage) (json.RawMessage, error) {
	switch method {
	case "vars.get":
		return json.RawMessage(`{"when":{"$dt":"2025-03-01T12:00:00.5Z"},"raw":{"$bytes":"AAEC"},"x":{"$float":"nan"},"plain":{"$dt":1}}`), nil
	case "vars.set":
		s.setParams = string(params)
		return json.RawMessage("null"), nil
	}
	return s.fakeServices.Call(ctx, g, method, params)
}

// Datetimes and bytes travel as tagged values both ways (METHODS.md);
// a result that only looks tagged stays as it is.
func TestPool_Run_TaggedValues(t *testing.T) {
	svc := &taggedServices{fakeServices: newFakeServices()}
	p := startPool(t, testConfig(t), svc)
	load(t, p, "m", `
import datetime, math

def f(args):
    v = system.vars.get("k")
    system.vars.set("k", {"at": datetime.datetime(2025, 3, 1, 12, 0, 0, tzinfo=datetime.timezone.utc), "b": b"\x00\x01"})
    return [v["when"].isoformat(), list(v["raw"]), math.isnan(v["x"]), v["plain"]]
`)
	got := mustRun(t, p, full, "m", "f", "null")
	if got != `["2025-03-01T12:00:00.500000+00:00",[0,1,2],true,{"$dt":1}]` {
		t.Errorf("result %s", got)
	}
	if svc.setParams != `{"key":"k","value":{"at":{"$dt":"2025-03-01T12:00:00Z"},"b":{"$bytes":"AAE="}}}` {
		t.Errorf("vars.set params %s", svc.setParams)
	}
}
