package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"qubiq.dev/edge/firmware"
	"qubiq.dev/edge/store"
	"qubiq.dev/edge/store/sqldb"
	"qubiq.dev/edge/value"
)

var tags = []string{"Line1/Pump/Speed", "Line1/Pump/Setpoint", "Line2/Tank/Level"}

type appliance struct {
	dir  string
	db   *store.DB
	hist *store.History
}

func newAppliance(t *testing.T) *appliance {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, err := store.OpenHistory(db, store.HistoryOptions{CommitEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a := &appliance{dir: dir, db: db, hist: h}
	t.Cleanup(func() { h.Close(context.Background()); db.Close() })
	now := time.Now()
	if err := db.PutUser(store.User{Name: "eng", Realm: "platform", Permissions: []string{"designer"}, Hash: "$argon2id$x", Created: now, Changed: now}); err != nil {
		t.Fatal(err)
	}
	db.PutAPIKey(store.APIKey{ID: "k1", Name: "ci", Created: now})
	db.PutSession(store.Session{ID: "s1", User: "eng", Created: now, LastSeen: now})
	db.PutMeta(BootstrapMeta, []byte("old-token-hash"))
	db.PutProject([]byte(`{"tags":[]}`))
	// a PostgreSQL connection whose DSN is sealed under this appliance's key
	sec, err := sqldb.LoadSecrets(filepath.Join(dir, sqldb.KeyFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := sqldb.Open(sqldb.Options{DataDir: dir, Secrets: sec, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Put(sqldb.Connection{Name: "plantdb", Driver: sqldb.DriverPostgres, DSN: sqldb.NewSecret("postgres://u:hunter22@db/plant")}); err != nil {
		t.Fatal(err)
	}
	reg.Close()
	os.MkdirAll(filepath.Join(dir, "files/reports"), 0o700)
	os.WriteFile(filepath.Join(dir, "files/reports/day.csv"), []byte("a,b\n1,2\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "pki/trusted"), 0o700)
	os.WriteFile(filepath.Join(dir, "pki/trusted/plc.der"), []byte("cert"), 0o600)
	os.WriteFile(filepath.Join(dir, "project.yaml"), []byte("devices: []\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "scripts"), 0o700)
	os.WriteFile(filepath.Join(dir, "scripts/pumps.py"), []byte("def f(a): return a\n"), 0o600)
	return a
}

func (a *appliance) opts() WriteOptions {
	return WriteOptions{Store: a.db, DataDir: a.dir, ProjectDir: a.dir, ProjectFiles: []string{"project.yaml", "scripts/pumps.py"}, ApplianceID: "line1-edge-01", Version: "1.0.0"}
}

func trends(t *testing.T, h *store.History) map[string][]store.TrendPoint {
	t.Helper()
	tr, err := h.Query(context.Background(), store.TrendQuery{Paths: tags, Start: time.Unix(0, 0), End: time.Now().Add(time.Hour), Aggregate: store.AggRaw})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]store.TrendPoint{}
	for _, x := range tr {
		out[x.Path] = x.Points
	}
	return out
}

func TestBackup_WhileWritesRun_RestoresConsistentCopy(t *testing.T) {
	a := newAppliance(t)
	// writers: history samples on three tags, one every 200 µs each
	var n atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	base := time.Now().Add(-time.Hour)
	for i, tag := range tags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				a.hist.Record(tag, store.Sample{Time: base.Add(time.Duration(k) * time.Millisecond), Value: value.Value(float64(k*10 + i)), Quality: value.Good})
				n.Add(1)
				time.Sleep(200 * time.Microsecond)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	a.hist.Flush(context.Background())
	before := trends(t, a.hist)
	var buf bytes.Buffer
	m, err := Write(context.Background(), &buf, a.opts())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	a.hist.Flush(context.Background())
	after := trends(t, a.hist)
	if m.Secrets != "plain" || len(m.Entries) < 6 {
		t.Fatalf("manifest %+v", m)
	}

	fresh := filepath.Join(t.TempDir(), "data")
	res, err := Restore(context.Background(), bytes.NewReader(buf.Bytes()), RestoreOptions{DataDir: fresh})
	if err != nil {
		t.Fatal(err)
	}
	if res.DroppedAPIKeys != 1 || res.DroppedSessions != 1 || !reflect.DeepEqual(res.Resealed, []string{"plantdb"}) || len(res.ProjectFiles) != 2 {
		t.Fatalf("result %+v", res)
	}
	db, err := store.Open(filepath.Join(fresh, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Fatalf("bbolt check of the restored store: %v", err)
	}
	h, err := store.OpenHistory(db, store.HistoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	got := trends(t, h)
	// The copy is one moment: for every tag a prefix of the final history,
	// holding at least what was flushed before the backup began.
	for _, tag := range tags {
		g, b, fin := got[tag], before[tag], after[tag]
		if len(g) < len(b) || len(g) > len(fin) || len(b) == 0 {
			t.Fatalf("%s: restored %d samples, %d before the backup, %d at the end", tag, len(g), len(b), len(fin))
		}
		if !reflect.DeepEqual(g, fin[:len(g)]) {
			t.Fatalf("%s: restored samples are not the original's (first %v / %v)", tag, g[:1], fin[:1])
		}
	}
	t.Logf("restored %d/%d/%d samples while %d were written", len(got[tags[0]]), len(got[tags[1]]), len(got[tags[2]]), n.Load())
	// same project, users kept, credentials dropped
	if p, _ := db.Project(); string(p) != `{"tags":[]}` {
		t.Fatalf("project %q", p)
	}
	if u, err := db.User("eng"); err != nil || u.Hash != "$argon2id$x" {
		t.Fatalf("user: %+v %v", u, err)
	}
	if ks, _ := db.APIKeys(); len(ks) != 0 {
		t.Fatal("api keys carried")
	}
	if hsh, _ := db.Meta(BootstrapMeta); hsh != nil {
		t.Fatal("bootstrap token hash carried")
	}
	// the connection secret opens with the NEW appliance's key only
	newKey, _ := os.ReadFile(filepath.Join(fresh, sqldb.KeyFile))
	oldKey, _ := os.ReadFile(filepath.Join(a.dir, sqldb.KeyFile))
	if len(newKey) != 32 || bytes.Equal(newKey, oldKey) {
		t.Fatal("the old appliance's key was carried into the new data dir")
	}
	sec, _ := sqldb.LoadSecrets(filepath.Join(fresh, sqldb.KeyFile), nil)
	reg, err := sqldb.Open(sqldb.Options{DataDir: fresh, Secrets: sec, Store: db})
	if err != nil {
		t.Fatalf("connections under the new key: %v", err)
	}
	reg.Close()
	for _, f := range []string{"files/reports/day.csv", "pki/trusted/plc.der", "restored-project/project.yaml", "restored-project/scripts/pumps.py"} {
		if _, err := os.Stat(filepath.Join(fresh, f)); err != nil {
			t.Errorf("%s not restored: %v", f, err)
		}
	}
	// and a second restore into the same place is refused
	if _, err := Restore(context.Background(), bytes.NewReader(buf.Bytes()), RestoreOptions{DataDir: fresh}); !errors.Is(err, ErrNotFresh) {
		t.Fatalf("restore over a store: %v", err)
	}
}

func TestBackup_SignedPassphraseAndTampering(t *testing.T) {
	a := newAppliance(t)
	priv, pub, _ := firmware.Keygen("site-backup", nil)
	key, _ := firmware.ParseSigningKey(priv)
	trusted, _ := firmware.ParseTrustedKeys(pub)
	opts := a.opts()
	opts.Key, opts.Passphrase = key, []byte("correct horse")
	var buf bytes.Buffer
	m, err := Write(context.Background(), &buf, opts)
	if err != nil || m.Secrets != "sealed" {
		t.Fatalf("%v %+v", err, m)
	}
	b := buf.Bytes()
	fresh := func() string { return filepath.Join(t.TempDir(), "d") }
	if _, err := Restore(context.Background(), bytes.NewReader(b), RestoreOptions{DataDir: fresh(), TrustedKeys: trusted}); !errors.Is(err, ErrPassword) {
		t.Fatalf("no passphrase: %v", err)
	}
	if _, err := Restore(context.Background(), bytes.NewReader(b), RestoreOptions{DataDir: fresh(), TrustedKeys: trusted, Passphrase: []byte("wrong")}); !errors.Is(err, ErrPassword) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	// Staging on a running appliance says the passphrase is wrong once.
	if _, err := StagePending(context.Background(), bytes.NewReader(b), RestoreOptions{DataDir: fresh(), TrustedKeys: trusted, Passphrase: []byte("wrong")}); !errors.Is(err, ErrPassword) ||
		strings.Count(err.Error(), ErrPassword.Error()) != 1 {
		t.Fatalf("staged with the wrong passphrase: %v, want ErrPassword said once", err)
	}
	_, otherPub, _ := firmware.Keygen("other", nil)
	other, _ := firmware.ParseTrustedKeys(otherPub)
	if _, err := Restore(context.Background(), bytes.NewReader(b), RestoreOptions{DataDir: fresh(), TrustedKeys: other, Passphrase: opts.Passphrase}); !errors.Is(err, ErrSignature) {
		t.Fatalf("untrusted signer: %v", err)
	}
	d := fresh()
	res, err := Restore(context.Background(), bytes.NewReader(b), RestoreOptions{DataDir: d, TrustedKeys: trusted, Passphrase: opts.Passphrase, KeepCredentials: true})
	if err != nil || res.SignedBy != "site-backup" || res.DroppedAPIKeys != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	// truncated: the manifest is at the end
	if _, err := Restore(context.Background(), bytes.NewReader(b[:len(b)/2]), RestoreOptions{DataDir: fresh()}); err == nil {
		t.Fatal("truncated backup restored")
	}
	ents, _ := os.ReadDir(d)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".restore-") {
			t.Fatalf("staging left: %s", e.Name())
		}
	}
	// a refused restore leaves the fresh dir without a store
	d2 := fresh()
	Restore(context.Background(), bytes.NewReader(b), RestoreOptions{DataDir: d2, TrustedKeys: other})
	if _, err := os.Stat(filepath.Join(d2, store.FileName)); err == nil {
		t.Fatal("store moved in despite a refusal")
	}
	// an entry changed after the backup was written
	bad := retar(t, b, func(name string, body []byte) []byte {
		if name == "files/reports/day.csv" {
			body[0] ^= 1
		}
		return body
	})
	if _, err := Restore(context.Background(), bytes.NewReader(bad), RestoreOptions{DataDir: fresh(), Passphrase: opts.Passphrase}); !errors.Is(err, ErrHash) {
		t.Fatalf("tampered entry: %v", err)
	}
}

func retar(t *testing.T, b []byte, edit func(string, []byte) []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		body, _ := io.ReadAll(tr)
		body = edit(h.Name, body)
		h.Size = int64(len(body))
		tw.WriteHeader(h)
		tw.Write(body)
	}
	tw.Close()
	zw.Close()
	return out.Bytes()
}

func TestStageAndApplyPending_OnAFreshAppliance(t *testing.T) {
	a := newAppliance(t)
	var buf bytes.Buffer
	if _, err := Write(context.Background(), &buf, a.opts()); err != nil {
		t.Fatal(err)
	}
	// the fresh appliance: a store of its own, with a bootstrap token
	fresh := filepath.Join(t.TempDir(), "data")
	db, err := store.Open(filepath.Join(fresh, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	os.WriteFile(filepath.Join(fresh, "bootstrap-token"), []byte("new\n"), 0o600)

	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)/2] ^= 1
	if _, err := StagePending(context.Background(), bytes.NewReader(bad), RestoreOptions{DataDir: fresh}); err == nil {
		t.Fatal("a damaged backup was staged")
	}
	if _, err := os.Stat(filepath.Join(fresh, PendingDir)); err == nil {
		t.Fatal("a refused backup left the restore dir")
	}
	if _, err := StagePending(context.Background(), bytes.NewReader(buf.Bytes()), RestoreOptions{DataDir: fresh}); err != nil {
		t.Fatal(err)
	}
	ok, res, err := ApplyPending(context.Background(), RestoreOptions{DataDir: fresh})
	if err != nil || !ok || res.DroppedAPIKeys != 1 {
		t.Fatalf("apply: %v %+v %v", ok, res, err)
	}
	if ok, _, _ := ApplyPending(context.Background(), RestoreOptions{DataDir: fresh}); ok {
		t.Fatal("applied twice")
	}
	db, err = store.Open(filepath.Join(fresh, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if u, err := db.User("eng"); err != nil || u.Name != "eng" {
		t.Fatalf("restored user: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, "bootstrap-token")); err == nil {
		t.Fatal("the replaced store's bootstrap token is still there")
	}
	if b, _ := os.ReadFile(filepath.Join(fresh, PendingDir, ResultFile)); !strings.Contains(string(b), `"ok": true`) {
		t.Fatalf("result file: %s", b)
	}
}

// TestApplyPending_RestoreAgain: an appliance restored once can be
// restored again: the project, files and trusted certificates the first
// restore left are set aside with the store, not refused as existing.
func TestApplyPending_RestoreAgain(t *testing.T) {
	a := newAppliance(t)
	var buf bytes.Buffer
	if _, err := Write(context.Background(), &buf, a.opts()); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "data")
	for round := 1; round <= 2; round++ {
		if _, err := StagePending(context.Background(), bytes.NewReader(buf.Bytes()), RestoreOptions{DataDir: fresh}); err != nil {
			t.Fatalf("round %d: stage: %v", round, err)
		}
		ok, res, err := ApplyPending(context.Background(), RestoreOptions{DataDir: fresh})
		if err != nil || !ok || len(res.ProjectFiles) == 0 {
			t.Fatalf("round %d: apply: %v %+v %v", round, ok, res, err)
		}
	}
	db, err := store.Open(filepath.Join(fresh, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if u, err := db.User("eng"); err != nil || u.Name != "eng" {
		t.Fatalf("restored user after the second restore: %v", err)
	}
	aside, _ := filepath.Glob(filepath.Join(fresh, "restored-project.before-restore-*"))
	if len(aside) != 1 {
		t.Errorf("the first restore's project set aside: %v, want one copy", aside)
	}
}

// auditOf commits recs to db's audit log.
func auditOf(t *testing.T, db *store.DB, actions ...string) {
	t.Helper()
	l := store.NewAuditLog(db, store.AuditOptions{}, slog.New(slog.DiscardHandler))
	for _, a := range actions {
		if err := l.Enqueue(store.AuditRecord{Principal: "eng", Action: a}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestApplyPending_KeepsTheAppliancesAuditLog: a restore never erases the
// appliance's audit trail: the restored store holds the audit records of
// the store it replaced, in order and with their sequence numbers, then
// one "appliance.restore" record of the restore applied; the backup's own
// records (the other appliance's) are not merged in.
func TestApplyPending_KeepsTheAppliancesAuditLog(t *testing.T) {
	a := newAppliance(t)
	auditOf(t, a.db, "source.only")
	var buf bytes.Buffer
	if _, err := Write(context.Background(), &buf, a.opts()); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "data")
	db, err := store.Open(filepath.Join(fresh, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	auditOf(t, db, "log.level", "appliance.backup", "appliance.restore")
	db.Close()
	if _, err := StagePending(context.Background(), bytes.NewReader(buf.Bytes()), RestoreOptions{DataDir: fresh}); err != nil {
		t.Fatal(err)
	}
	ok, res, err := ApplyPending(context.Background(), RestoreOptions{DataDir: fresh})
	if err != nil || !ok || res.AuditCarried != 3 {
		t.Fatalf("apply: %v %+v %v", ok, res, err)
	}
	db, err = store.Open(filepath.Join(fresh, store.FileName), store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recs, err := db.AuditRecords(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, r := range recs {
		got = append(got, r.Action+"/"+r.Result)
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d has seq %d", i, r.Seq)
		}
	}
	if want := []string{"log.level/", "appliance.backup/", "appliance.restore/", "appliance.restore/applied"}; !slices.Equal(got, want) {
		t.Fatalf("audit after the restore = %q, want %q", got, want)
	}
	if last := recs[len(recs)-1]; !strings.Contains(string(last.After), `"from_appliance"`) || last.Target != res.Manifest.ApplianceID {
		t.Errorf("the restore's record: %+v", last)
	}
	// A record committed after the restore follows them.
	auditOf(t, db, "after")
	if recs, _ := db.AuditRecords(4, 0); len(recs) != 1 || recs[0].Seq != 5 {
		t.Fatalf("next record: %+v", recs)
	}
}
