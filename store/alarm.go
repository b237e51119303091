package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"qubiq.dev/edge/value"
)

// The alarm journal and the alarms' persisted state (docs/alarms.md,
// "Journal"), in the top-level bucket "alarms", made at the first commit:
//
//	alarms/journal   seq (8-byte big-endian) → entry (JSON)
//	alarms/by_time   unix nanoseconds (8 bytes) + seq (8 bytes) → nothing
//	alarms/state     alarm id → the alarm package's state record (opaque JSON)
//	alarms/meta      "bytes", "count" → 8-byte big-endian totals of the journal
//
// The journal is append-only in commit order (seq); retention removes its
// oldest entries by age and by size (PruneAlarmJournal).
var (
	bucketAlarms = []byte("alarms")
	alarmJournal = []byte("journal")
	alarmByTime  = []byte("by_time")
	alarmState   = []byte("state")
	alarmMeta    = []byte("meta")
	alarmBytes   = []byte("bytes")
	alarmCount   = []byte("count")
)

// AlarmEntry is one transition of one alarm in the journal: its sequence
// number (commit order, from 1; set by CommitAlarms), when (At, UTC), the
// alarm (ID "<source tag>:<name>", Source, Priority), what happened (Event,
// such as "activate", "clear", "ack", "shelve"; the states From and To;
// Cause in words; By, the principal of an operator action, "" for the
// process), the source's value and quality at that moment, and the text of
// a note.
type AlarmEntry struct {
	Seq      uint64
	At       time.Time
	ID       string
	Source   string
	Priority string
	Event    string
	From     string
	To       string
	Cause    string
	By       string
	Value    value.Value
	Quality  value.Quality
	Note     string
}

// AlarmState is the persisted state of one alarm: Data is the alarm
// package's record, kept as it is.
type AlarmState struct {
	ID   string
	Data []byte
}

// AlarmQuery selects journal entries. Zero fields do not filter.
type AlarmQuery struct {
	// From and To bound At (inclusive). Entries are in commit order, which
	// follows the clock: a query with To ends at the first entry after it.
	From, To time.Time
	// Path is a source tag path or folder (whole segments: "Line1" matches
	// "Line1/Tank/Level", not "Line10/..."), or an alarm id ("<path>:<name>").
	Path string
	// Priority keeps entries of that priority; State those whose To is it.
	Priority string
	State    string
	// After continues a query: ascending, the entries after sequence number
	// After; with Desc, the entries before it (0: from the newest).
	After uint64
	Desc  bool
	// Limit caps the entries returned: default 100, at most
	// MaxAlarmQueryLimit.
	Limit int
	// Allow, when set, keeps only the entries whose source it allows (a
	// grant's tag prefixes).
	Allow func(source string) bool
}

// MaxAlarmQueryLimit caps AlarmQuery.Limit; alarmScanLimit caps the entries
// one query looks at (it then answers a continuation).
const (
	MaxAlarmQueryLimit = 1000
	alarmScanLimit     = 100000
)

// alarmEntryJSON is the stored form of an entry (the sequence number is the
// key).
type alarmEntryJSON struct {
	At       time.Time       `json:"t"`
	ID       string          `json:"id"`
	Source   string          `json:"src"`
	Priority string          `json:"pri"`
	Event    string          `json:"ev"`
	From     string          `json:"from"`
	To       string          `json:"to"`
	Cause    string          `json:"cause,omitempty"`
	By       string          `json:"by,omitempty"`
	Value    json.RawMessage `json:"v,omitempty"`
	Quality  string          `json:"q,omitempty"`
	Note     string          `json:"note,omitempty"`
}

func encodeAlarmEntry(e AlarmEntry) ([]byte, error) {
	j := alarmEntryJSON{At: e.At.UTC(), ID: e.ID, Source: e.Source, Priority: e.Priority, Event: e.Event,
		From: e.From, To: e.To, Cause: e.Cause, By: e.By, Quality: e.Quality.String(), Note: e.Note}
	if e.Value != nil {
		raw, err := value.EncodeJSON(e.Value)
		if err != nil {
			return nil, fmt.Errorf("alarm %q: value: %w", e.ID, err)
		}
		j.Value = raw
	}
	return json.Marshal(j)
}

func decodeAlarmEntry(seq uint64, b []byte) (AlarmEntry, error) {
	var j alarmEntryJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return AlarmEntry{}, fmt.Errorf("alarm journal entry %d: %w", seq, err)
	}
	e := AlarmEntry{Seq: seq, At: j.At, ID: j.ID, Source: j.Source, Priority: j.Priority, Event: j.Event,
		From: j.From, To: j.To, Cause: j.Cause, By: j.By, Note: j.Note}
	if j.Quality != "" {
		q, err := value.ParseQuality(j.Quality)
		if err == nil {
			e.Quality = q
		}
	}
	if len(j.Value) > 0 {
		v, err := value.DecodeJSON(j.Value)
		if err == nil {
			e.Value = v
		}
	}
	return e, nil
}

// alarmTimeKey is the by_time key of an entry: unix nanoseconds, then seq.
func alarmTimeKey(at time.Time, seq uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, uint64(max(at.UnixNano(), 0)))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k
}

// alarmBuckets returns the sub-buckets of "alarms", creating them in a
// write transaction (nil ones in a read transaction of a store that has
// none yet).
func alarmBuckets(tx *bolt.Tx) (journal, byTime, state, meta *bolt.Bucket, err error) {
	root := tx.Bucket(bucketAlarms)
	if root == nil {
		if !tx.Writable() {
			return nil, nil, nil, nil, nil
		}
		if root, err = tx.CreateBucket(bucketAlarms); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	get := func(name []byte) (*bolt.Bucket, error) {
		if b := root.Bucket(name); b != nil || !tx.Writable() {
			return b, nil
		}
		return root.CreateBucket(name)
	}
	if journal, err = get(alarmJournal); err != nil {
		return
	}
	if byTime, err = get(alarmByTime); err != nil {
		return
	}
	if state, err = get(alarmState); err != nil {
		return
	}
	meta, err = get(alarmMeta)
	return
}

func metaU64(meta *bolt.Bucket, k []byte) uint64 {
	if meta == nil {
		return 0
	}
	v := meta.Get(k)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// CommitAlarms appends entries to the journal (setting each one's Seq, in
// order), puts the states and deletes the states of the ids in deleted, in
// one transaction committed (fsync'd) before it returns. On error nothing
// was written and the entries' Seq are zero.
func (db *DB) CommitAlarms(entries []AlarmEntry, states []AlarmState, deleted []string) error {
	if len(entries) == 0 && len(states) == 0 && len(deleted) == 0 {
		return nil
	}
	encoded := make([][]byte, len(entries))
	for i, e := range entries {
		if e.ID == "" || e.At.IsZero() {
			return fmt.Errorf("store: alarm journal entry %d: no id or time: %w", i, ErrInvalid)
		}
		b, err := encodeAlarmEntry(e)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		encoded[i] = b
	}
	seqs := make([]uint64, len(entries))
	err := db.update(func(tx *bolt.Tx) error {
		journal, byTime, state, meta, err := alarmBuckets(tx)
		if err != nil {
			return err
		}
		total, count := metaU64(meta, alarmBytes), metaU64(meta, alarmCount)
		for i, b := range encoded {
			seq, err := journal.NextSequence()
			if err != nil {
				return err
			}
			if err := journal.Put(u64Key(seq), b); err != nil {
				return err
			}
			if err := byTime.Put(alarmTimeKey(entries[i].At, seq), nil); err != nil {
				return err
			}
			seqs[i] = seq
			total += uint64(len(b))
			count++
		}
		for _, s := range states {
			if s.ID == "" {
				return fmt.Errorf("alarm state without an id: %w", ErrInvalid)
			}
			if err := state.Put([]byte(s.ID), s.Data); err != nil {
				return err
			}
		}
		for _, id := range deleted {
			if err := state.Delete([]byte(id)); err != nil {
				return err
			}
		}
		if err := meta.Put(alarmBytes, u64Key(total)); err != nil {
			return err
		}
		return meta.Put(alarmCount, u64Key(count))
	})
	if err != nil {
		return fmt.Errorf("store: commit alarms: %w", err)
	}
	for i := range entries {
		entries[i].Seq = seqs[i]
	}
	return nil
}

// LoadAlarmStates returns every persisted alarm state by id (copies).
func (db *DB) LoadAlarmStates() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := db.view(func(tx *bolt.Tx) error {
		_, _, state, _, err := alarmBuckets(tx)
		if err != nil || state == nil {
			return err
		}
		return state.ForEach(func(k, v []byte) error {
			out[string(k)] = clone(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: load alarm states: %w", err)
	}
	return out, nil
}

// alarmMatch reports whether e passes q's filters other than time.
func alarmMatch(q *AlarmQuery, e *AlarmEntry) bool {
	if q.Priority != "" && e.Priority != q.Priority {
		return false
	}
	if q.State != "" && e.To != q.State {
		return false
	}
	if q.Path != "" && e.ID != q.Path && e.Source != q.Path && !strings.HasPrefix(e.Source, strings.TrimSuffix(q.Path, "/")+"/") {
		return false
	}
	if q.Allow != nil && !q.Allow(e.Source) {
		return false
	}
	return true
}

// QueryAlarmJournal returns the entries q selects, in commit order
// (newest first with q.Desc), and next: the sequence number to pass as
// After for the following page, 0 when there is none. A query looks at
// most at 100,000 entries; when it stops there, next continues it.
func (db *DB) QueryAlarmJournal(q AlarmQuery) (entries []AlarmEntry, next uint64, err error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, MaxAlarmQueryLimit)
	err = db.view(func(tx *bolt.Tx) error {
		journal, byTime, _, _, err := alarmBuckets(tx)
		if err != nil || journal == nil {
			return err
		}
		c := journal.Cursor()
		var k, v []byte
		// The first entry to look at.
		switch {
		case !q.Desc:
			if q.After == math.MaxUint64 {
				return nil // nothing comes after the last possible sequence number
			}
			start := q.After + 1
			if !q.From.IsZero() {
				if tk, _ := byTime.Cursor().Seek(alarmTimeKey(q.From, 0)); tk != nil {
					start = max(start, binary.BigEndian.Uint64(tk[8:]))
				} else {
					return nil // nothing at or after From
				}
			}
			k, v = c.Seek(u64Key(start))
		default:
			if q.After > 0 {
				k, v = c.Seek(u64Key(q.After))
				if k == nil {
					k, v = c.Last()
				} else {
					k, v = c.Prev()
				}
			} else {
				k, v = c.Last()
			}
			if !q.To.IsZero() {
				tc := byTime.Cursor()
				tk, _ := tc.Seek(alarmTimeKey(q.To.Add(time.Nanosecond), 0))
				if tk == nil {
					tk, _ = tc.Last()
				} else {
					tk, _ = tc.Prev()
				}
				if tk == nil {
					return nil // nothing at or before To
				}
				if s := binary.BigEndian.Uint64(tk[8:]); k != nil && binary.BigEndian.Uint64(k) > s {
					k, v = c.Seek(u64Key(s))
				}
			}
		}
		scanned := 0
		for ; k != nil; scanned++ {
			seq := binary.BigEndian.Uint64(k)
			if scanned >= alarmScanLimit {
				next = seq
				if !q.Desc {
					next = seq - 1
				} else {
					next = seq + 1
				}
				return nil
			}
			e, err := decodeAlarmEntry(seq, v)
			if err != nil {
				return err
			}
			if !q.Desc && !q.To.IsZero() && e.At.After(q.To) {
				return nil
			}
			if q.Desc && !q.From.IsZero() && e.At.Before(q.From) {
				return nil
			}
			inTime := (q.From.IsZero() || !e.At.Before(q.From)) && (q.To.IsZero() || !e.At.After(q.To))
			if inTime && alarmMatch(&q, &e) {
				if len(entries) == limit {
					next = entries[len(entries)-1].Seq
					return nil
				}
				entries = append(entries, e)
			}
			if q.Desc {
				k, v = c.Prev()
			} else {
				k, v = c.Next()
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: query alarm journal: %w", err)
	}
	return entries, next, nil
}

// AlarmJournalInfo is the journal's size: entries, their encoded bytes,
// and the time of the oldest entry (zero when empty).
type AlarmJournalInfo struct {
	Entries uint64
	Bytes   uint64
	Oldest  time.Time
}

// AlarmJournalInfo returns the journal's size.
func (db *DB) AlarmJournalInfo() (AlarmJournalInfo, error) {
	var info AlarmJournalInfo
	err := db.view(func(tx *bolt.Tx) error {
		journal, _, _, meta, err := alarmBuckets(tx)
		if err != nil || journal == nil {
			return err
		}
		info.Entries, info.Bytes = metaU64(meta, alarmCount), metaU64(meta, alarmBytes)
		if k, v := journal.Cursor().First(); k != nil {
			e, err := decodeAlarmEntry(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			info.Oldest = e.At
		}
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("store: alarm journal info: %w", err)
	}
	return info, nil
}

// alarmPruneBatch is how many entries one retention transaction removes,
// so no transaction grows large.
const alarmPruneBatch = 5000

// PruneAlarmJournal removes the oldest journal entries while they are
// older than before (zero: no age limit) or the journal's encoded size is
// above maxBytes (0: no size limit). It returns how many it removed. The
// alarms' states are not touched.
func (db *DB) PruneAlarmJournal(before time.Time, maxBytes int64) (int, error) {
	removed := 0
	for {
		n, more, err := db.pruneAlarmBatch(before, maxBytes)
		removed += n
		if err != nil {
			return removed, fmt.Errorf("store: prune alarm journal: %w", err)
		}
		if !more {
			return removed, nil
		}
	}
}

func (db *DB) pruneAlarmBatch(before time.Time, maxBytes int64) (n int, more bool, err error) {
	err = db.update(func(tx *bolt.Tx) error {
		journal, byTime, _, meta, err := alarmBuckets(tx)
		if err != nil {
			return err
		}
		total, count := metaU64(meta, alarmBytes), metaU64(meta, alarmCount)
		c := journal.Cursor()
		type victim struct {
			seq uint64
			at  time.Time
		}
		var victims []victim
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(victims) == alarmPruneBatch {
				more = true
				break
			}
			seq := binary.BigEndian.Uint64(k)
			var j struct {
				At time.Time `json:"t"`
			}
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("entry %d: %w", seq, err)
			}
			old := !before.IsZero() && j.At.Before(before)
			big := maxBytes > 0 && total > uint64(maxBytes)
			if !old && !big {
				break
			}
			total -= min(total, uint64(len(v)))
			count -= min(count, 1)
			victims = append(victims, victim{seq, j.At})
		}
		for _, vi := range victims {
			if err := journal.Delete(u64Key(vi.seq)); err != nil {
				return err
			}
			if err := byTime.Delete(alarmTimeKey(vi.at, vi.seq)); err != nil {
				return err
			}
		}
		n = len(victims)
		if n == 0 {
			return nil
		}
		if err := meta.Put(alarmBytes, u64Key(total)); err != nil {
			return err
		}
		return meta.Put(alarmCount, u64Key(count))
	})
	if err != nil {
		return 0, false, err
	}
	return n, more, nil
}

// ScanAlarmJournal calls fn for each entry at or after from, in commit
// order, until fn returns false or limit entries were seen (0: no limit).
// It reads in short transactions of up to 5,000 entries.
func (db *DB) ScanAlarmJournal(from time.Time, limit int, fn func(AlarmEntry) bool) error {
	after := uint64(0)
	seen := 0
	for {
		q := AlarmQuery{From: from, After: after, Limit: MaxAlarmQueryLimit}
		page, next, err := db.QueryAlarmJournal(q)
		if err != nil {
			return err
		}
		for _, e := range page {
			if !fn(e) {
				return nil
			}
			seen++
			if limit > 0 && seen >= limit {
				return nil
			}
		}
		if next == 0 {
			return nil
		}
		after = next
		from = time.Time{}
	}
}
