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

// Errors of the versioned script operations.
var (
	// ErrStaleVersion is wrapped by SaveScriptAt when the version is not
	// above every version the module was ever given.
	ErrStaleVersion = errors.New("version is not above the module's latest")
	// ErrOnlyVersion is wrapped by DropLatestScript when the module has
	// a single version: there is nothing to go back to.
	ErrOnlyVersion = errors.New("the module has no earlier version")
)

// SaveScriptAt stores code and meta as version of module, for callers that
// number their versions (a supervisor's push). version must be above every
// version the module was ever given (else the error wraps
// ErrStaleVersion and nothing is stored); the module's counter moves to it,
// so SaveScript continues above it. An empty module name or a version
// below 1 wraps ErrInvalid.
func (db *DB) SaveScriptAt(module string, version int, code string, meta []byte) error {
	if err := checkKey("script module", module); err != nil {
		return err
	}
	if version < 1 || version > math.MaxInt32 {
		return fmt.Errorf("store: save script %q: version %d out of range: %w", module, version, ErrInvalid)
	}
	err := db.update(func(tx *bolt.Tx) error {
		root, err := bucket(tx, bucketScripts)
		if err != nil {
			return err
		}
		mb, err := root.CreateBucketIfNotExists([]byte(module))
		if err != nil {
			return err
		}
		if last := mb.Sequence(); uint64(version) <= last {
			return fmt.Errorf("version %d: %w (%d)", version, ErrStaleVersion, last)
		}
		if err := mb.SetSequence(uint64(version)); err != nil {
			return err
		}
		b, err := json.Marshal(scriptRecord{Code: code, Meta: meta, Saved: db.now().UTC()})
		if err != nil {
			return err
		}
		return mb.Put(u64Key(uint64(version)), b)
	})
	if err != nil {
		return fmt.Errorf("store: save script %q: %w", module, err)
	}
	return nil
}

// DropLatestScript removes the latest version of module and returns the
// version latest now (a rollback). Version numbers are not reused. A
// module without versions wraps ErrNotFound, one with a single version
// ErrOnlyVersion (nothing removed).
func (db *DB) DropLatestScript(module string) (Script, error) {
	var s Script
	err := db.update(func(tx *bolt.Tx) error {
		mb, err := moduleBucket(tx, module)
		if err != nil {
			return err
		}
		c := mb.Cursor()
		k, _ := c.Last()
		if k == nil {
			return &notFoundError{what: "script", id: module}
		}
		pk, pv := c.Prev()
		if pk == nil {
			return ErrOnlyVersion // scriptErr names the module
		}
		if s, err = decodeScript(module, pk, pv); err != nil {
			return err
		}
		return mb.Delete(clone(k))
	})
	return s, scriptErr(module, err)
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
