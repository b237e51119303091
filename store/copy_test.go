package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"qubiq.dev/edge/value"
)

// Nothing the store returns aliases bbolt's memory map: every slice read
// before Close is still readable after Close has unmapped the file (an
// aliased slice would fault here) and holds what was stored.
func TestDB_Reads_CopyOutOfTransactions(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir+"/"+FileName, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.PutMeta("m", []byte("meta-value")))
	must(db.PutProject([]byte(`{"version":1}`)))
	must(db.SaveLastValues(map[string]value.VQT{"T/x": {Value: "string-value", Quality: value.Good}}))
	must(db.PutAPIKey(APIKey{ID: "k1", Name: "key-name", Hash: []byte("hash-bytes")}))
	_, err = db.SaveScript("mod", "code-text", []byte("script-meta"))
	must(err)
	log := NewAuditLog(db, AuditOptions{}, nil)
	must(log.Enqueue(AuditRecord{Action: "act", Before: json.RawMessage(`"before"`)}))
	must(log.Close(context.Background()))

	meta, err := db.Meta("m")
	must(err)
	proj, err := db.Project()
	must(err)
	lv, err := db.LoadLastValues()
	must(err)
	key, err := db.APIKey("k1")
	must(err)
	scr, err := db.Script("mod")
	must(err)
	recs, err := db.AuditRecords(0, 10)
	must(err)
	must(db.Close())

	for name, got := range map[string]string{
		"meta":       string(meta),
		"project":    string(proj),
		"last value": lv["T/x"].Value.(string),
		"api key":    string(key.Hash) + key.Name,
		"script":     scr.Code + string(scr.Meta),
		"audit":      string(recs[0].Before) + recs[0].Action,
		"tag path key": func() string {
			for k := range lv {
				return k
			}
			return ""
		}(),
	} {
		want := map[string]string{"meta": "meta-value", "project": `{"version":1}`, "last value": "string-value",
			"api key": "hash-byteskey-name", "script": "code-textscript-meta", "audit": `"before"act`, "tag path key": "T/x"}[name]
		if got != want {
			t.Errorf("%s after Close = %q, want %q", name, got, want)
		}
	}
}
