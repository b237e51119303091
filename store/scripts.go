package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Script is one saved version of a script module: its code, the caller's
// Meta bytes (e.g. the entries and their timeouts read from the AST, as
// JSON) and when it was saved (UTC).
type Script struct {
	Module  string
	Version int
	Code    string
	Meta    []byte
	Saved   time.Time
}

// scriptRecord is a script version on disk, keyed by the 8-byte big-endian
// version inside the module's bucket.
type scriptRecord struct {
	Code  string    `json:"code"`
	Meta  []byte    `json:"meta,omitempty"`
	Saved time.Time `json:"saved"`
}

// The scripts bucket holds one nested bucket per module; the nested bucket
// holds the versions, keyed by u64Key(version), and its bbolt sequence is
// the last version ever given, so versions are never reused, not even after
// DeleteScript.

// SaveScript stores code and meta as the next version of module and returns
// that version: 1 for a new module, then one more than the last version ever
// saved (versions rise and are never reused, even after DeleteScript). All
// versions are kept. An empty module name wraps ErrInvalid.
func (db *DB) SaveScript(module, code string, meta []byte) (version int, err error) {
	if err := checkKey("script module", module); err != nil {
		return 0, err
	}
	err = db.update(func(tx *bolt.Tx) error {
		root, err := bucket(tx, bucketScripts)
		if err != nil {
			return err
		}
		mb, err := root.CreateBucketIfNotExists([]byte(module))
		if err != nil {
			return err
		}
		seq, err := mb.NextSequence()
		if err != nil {
			return err
		}
		if seq > math.MaxInt32 {
			return fmt.Errorf("version %d out of range", seq)
		}
		b, err := json.Marshal(scriptRecord{Code: code, Meta: meta, Saved: db.now().UTC()})
		if err != nil {
			return err
		}
		version = int(seq)
		return mb.Put(u64Key(seq), b)
	})
	if err != nil {
		return 0, fmt.Errorf("store: save script %q: %w", module, err)
	}
	return version, nil
}

// Script returns the latest version of module. A module without versions
// wraps ErrNotFound.
func (db *DB) Script(module string) (Script, error) {
	var s Script
	err := db.view(func(tx *bolt.Tx) error {
		mb, err := moduleBucket(tx, module)
		if err != nil {
			return err
		}
		k, v := mb.Cursor().Last()
		if k == nil {
			return &notFoundError{what: "script", id: module}
		}
		s, err = decodeScript(module, k, v)
		return err
	})
	return s, scriptErr(module, err)
}

// ScriptVersion returns version of module; a missing one wraps ErrNotFound.
func (db *DB) ScriptVersion(module string, version int) (Script, error) {
	var s Script
	err := db.view(func(tx *bolt.Tx) error {
		mb, err := moduleBucket(tx, module)
		if err != nil {
			return err
		}
		var v []byte
		if version > 0 {
			v = mb.Get(u64Key(uint64(version)))
		}
		if v == nil {
			return &notFoundError{what: "script version", id: fmt.Sprintf("%s@%d", module, version)}
		}
		s, err = decodeScript(module, u64Key(uint64(version)), v)
		return err
	})
	return s, scriptErr(module, err)
}

// ScriptVersions returns every stored version of module, oldest first. A
// module without versions wraps ErrNotFound.
func (db *DB) ScriptVersions(module string) ([]Script, error) {
	var out []Script
	err := db.view(func(tx *bolt.Tx) error {
		mb, err := moduleBucket(tx, module)
		if err != nil {
			return err
		}
		err = mb.ForEach(func(k, v []byte) error {
			s, err := decodeScript(module, k, v)
			if err != nil {
				return err
			}
			out = append(out, s)
			return nil
		})
		if err == nil && len(out) == 0 {
			return &notFoundError{what: "script", id: module}
		}
		return err
	})
	if err != nil {
		return nil, scriptErr(module, err)
	}
	return out, nil
}

// Scripts returns the latest version of every module that has one, ordered
// by module name.
func (db *DB) Scripts() ([]Script, error) {
	var out []Script
	err := db.view(func(tx *bolt.Tx) error {
		root, err := bucket(tx, bucketScripts)
		if err != nil {
			return err
		}
		return root.ForEachBucket(func(name []byte) error {
			k, v := root.Bucket(name).Cursor().Last()
			if k == nil {
				return nil // deleted module: versions gone, sequence kept
			}
			s, err := decodeScript(string(name), k, v)
			if err != nil {
				return err
			}
			out = append(out, s)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: scripts: %w", err)
	}
	return out, nil
}

// DeleteScript removes every version of module. Its version counter is
// kept, so a later SaveScript of the same module continues above the last
// version. A module without versions wraps ErrNotFound.
func (db *DB) DeleteScript(module string) error {
	err := db.update(func(tx *bolt.Tx) error {
		mb, err := moduleBucket(tx, module)
		if err != nil {
			return err
		}
		var keys [][]byte
		c := mb.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			keys = append(keys, clone(k))
		}
		if len(keys) == 0 {
			return &notFoundError{what: "script", id: module}
		}
		for _, k := range keys {
			if err := mb.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return scriptErr(module, err)
	}
	return nil
}

func moduleBucket(tx *bolt.Tx, module string) (*bolt.Bucket, error) {
	root, err := bucket(tx, bucketScripts)
	if err != nil {
		return nil, err
	}
	var mb *bolt.Bucket
	if module != "" {
		mb = root.Bucket([]byte(module))
	}
	if mb == nil {
		return nil, &notFoundError{what: "script", id: module}
	}
	return mb, nil
}

func decodeScript(module string, k, v []byte) (Script, error) {
	n, err := keyU64(k)
	if err != nil {
		return Script{}, fmt.Errorf("script %q: %w", module, err)
	}
	var r scriptRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return Script{}, fmt.Errorf("script %q version %d: %w", module, n, err)
	}
	// json.Unmarshal allocates Code and Meta: nothing aliases bbolt memory.
	return Script{Module: module, Version: int(n), Code: r.Code, Meta: r.Meta, Saved: r.Saved}, nil
}

func scriptErr(module string, err error) error {
	if err == nil {
		return nil
	}
	if nf := (*notFoundError)(nil); errors.As(err, &nf) {
		return err
	}
	return fmt.Errorf("store: script %q: %w", module, err)
}
