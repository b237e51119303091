package store

import (
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"
)

// The versions of flows (docs/flows.md, "Versions and rollback"): like
// script modules, a flow's versions are numbered 1, 2, ... and never
// reused; each holds an opaque record (the flow engine's: the definition,
// who saved it and when). The flows bucket holds one nested bucket per
// flow name, keyed by u64Key(version); its bbolt sequence is the last
// version ever given. The bucket is made at the first save (no migration:
// a store without it simply has no flows).
//
// The methods answer "not found", "stale" and "only one version" as
// booleans rather than errors, so the flow engine, which must not import
// the store, needs no sentinel of it; err is for failures of the store
// itself.

var bucketFlows = []byte("flows")

// SaveFlowVersion stores rec as version of the flow name: the next one
// when version is 0, else version, which must be above every version the
// flow was ever given (else stale is true and nothing is stored). It
// returns the version stored. An empty name wraps ErrInvalid.
func (db *DB) SaveFlowVersion(name string, version int, rec []byte) (saved int, stale bool, err error) {
	if err := checkKey("flow name", name); err != nil {
		return 0, false, err
	}
	if version < 0 || version > math.MaxInt32 {
		return 0, false, fmt.Errorf("store: save flow %q: version %d out of range: %w", name, version, ErrInvalid)
	}
	err = db.update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bucketFlows)
		if err != nil {
			return err
		}
		fb, err := root.CreateBucketIfNotExists([]byte(name))
		if err != nil {
			return err
		}
		last := fb.Sequence()
		switch {
		case version == 0:
			if last >= math.MaxInt32 {
				return fmt.Errorf("version %d out of range", last+1)
			}
			saved = int(last + 1)
		case uint64(version) <= last:
			stale = true
			return nil
		default:
			saved = version
		}
		if err := fb.SetSequence(uint64(saved)); err != nil {
			return err
		}
		return fb.Put(u64Key(uint64(saved)), rec)
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: save flow %q: %w", name, err)
	}
	if stale {
		return 0, true, nil
	}
	return saved, false, nil
}

// flowBucket returns the bucket of name, or nil.
func flowBucket(tx *bolt.Tx, name string) *bolt.Bucket {
	root := tx.Bucket(bucketFlows)
	if root == nil || name == "" {
		return nil
	}
	return root.Bucket([]byte(name))
}

// FlowVersion returns version (0: the latest) of the flow name and its
// record; ok is false when there is no such flow or version.
func (db *DB) FlowVersion(name string, version int) (v int, rec []byte, ok bool, err error) {
	err = db.view(func(tx *bolt.Tx) error {
		fb := flowBucket(tx, name)
		if fb == nil {
			return nil
		}
		var k, val []byte
		if version == 0 {
			k, val = fb.Cursor().Last()
		} else if version > 0 {
			k = u64Key(uint64(version))
			val = fb.Get(k)
		}
		if k == nil || val == nil {
			return nil
		}
		n, err := keyU64(k)
		if err != nil {
			return err
		}
		v, rec, ok = int(n), clone(val), true
		return nil
	})
	if err != nil {
		return 0, nil, false, fmt.Errorf("store: flow %q: %w", name, err)
	}
	return v, rec, ok, nil
}

// FlowVersions returns every stored version of the flow name and its
// records, oldest first; none when the flow has none.
func (db *DB) FlowVersions(name string) (versions []int, recs [][]byte, err error) {
	err = db.view(func(tx *bolt.Tx) error {
		fb := flowBucket(tx, name)
		if fb == nil {
			return nil
		}
		return fb.ForEach(func(k, v []byte) error {
			n, err := keyU64(k)
			if err != nil {
				return err
			}
			versions = append(versions, int(n))
			recs = append(recs, clone(v))
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: flow %q: %w", name, err)
	}
	return versions, recs, nil
}

// LatestFlows returns the latest version of every flow that has one, and
// its record, ordered by name.
func (db *DB) LatestFlows() (names []string, versions []int, recs [][]byte, err error) {
	err = db.view(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketFlows)
		if root == nil {
			return nil
		}
		return root.ForEachBucket(func(name []byte) error {
			k, v := root.Bucket(name).Cursor().Last()
			if k == nil {
				return nil // deleted: versions gone, sequence kept
			}
			n, err := keyU64(k)
			if err != nil {
				return fmt.Errorf("flow %q: %w", name, err)
			}
			names = append(names, string(name))
			versions = append(versions, int(n))
			recs = append(recs, clone(v))
			return nil
		})
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("store: flows: %w", err)
	}
	return names, versions, recs, nil
}

// DropLatestFlowVersion removes the latest version of the flow name (a
// rollback) and returns the version latest now and its record. found is
// false when the flow has no versions; only is true when it has one
// (nothing removed).
func (db *DB) DropLatestFlowVersion(name string) (v int, rec []byte, found, only bool, err error) {
	err = db.update(func(tx *bolt.Tx) error {
		fb := flowBucket(tx, name)
		if fb == nil {
			return nil
		}
		c := fb.Cursor()
		k, _ := c.Last()
		if k == nil {
			return nil
		}
		found = true
		pk, pv := c.Prev()
		if pk == nil {
			only = true
			return nil
		}
		n, err := keyU64(pk)
		if err != nil {
			return err
		}
		v, rec = int(n), clone(pv)
		return fb.Delete(clone(k))
	})
	if err != nil {
		return 0, nil, false, false, fmt.Errorf("store: flow %q: %w", name, err)
	}
	return v, rec, found, only, nil
}

// DeleteFlowVersions removes every version of the flow name; its version
// counter is kept, so a later save continues above it. found is false when
// it had none.
func (db *DB) DeleteFlowVersions(name string) (found bool, err error) {
	err = db.update(func(tx *bolt.Tx) error {
		fb := flowBucket(tx, name)
		if fb == nil {
			return nil
		}
		var keys [][]byte
		c := fb.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			keys = append(keys, clone(k))
		}
		for _, k := range keys {
			if err := fb.Delete(k); err != nil {
				return err
			}
		}
		found = len(keys) > 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: flow %q: %w", name, err)
	}
	return found, nil
}
