package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"qubiq.dev/edge/value"
)

// History samples are packed per tag in blocks (docs/project.md, store: history;
// bench/README.md, B9: packing samples per tag is how ingest beats one row per
// sample). A block is
//
//	[1]  format version (blockVersion)
//	[8]  first: smallest sample time, unix nanoseconds, big-endian (signed)
//	[8]  last: largest sample time
//	[4]  count of samples, big-endian
//	then count samples, each
//	  varint  time delta from the previous sample (the first from first), zigzag
//	  [1]     quality (value.Quality); with its top bit set a uvarint
//	          raw status code follows (OPC UA; absent when 0, so blocks
//	          written before status codes were kept read unchanged)
//	  [1]     value kind (hk* below), then the value's bytes
//
// A persisted block is sorted by time, and blocks of one tag do not
// overlap: each block's first is above the previous block's last. Its key in
// the tag's bucket is timeKey(first): 8 bytes big-endian, so a cursor walks
// blocks in time order (as decimal strings, "10" would sort before "9").
const (
	blockVersion  = 1
	blockHeader   = 1 + 8 + 8 + 4
	blockMaxCount = 512 // samples per block
	// blockMaxBytes keeps a block inside one 4 KiB bbolt page (with the
	// page and element headers and its key), so no block spills onto an
	// overflow page half empty.
	blockMaxBytes  = 3968 - blockHeader - 64
	maxSampleBytes = 64 << 10
)

// Value kinds of the block and journal encodings.
const (
	hkNil byte = iota
	hkFalse
	hkTrue
	hkInt   // zigzag varint
	hkUint  // uvarint
	hkFloat // 8 bytes, IEEE 754 big-endian
	hkString
	hkJSON // arrays: uvarint length + JSON
)

var errBlockCorrupt = errors.New("history block corrupt")

// timeKey encodes unix nanoseconds so that byte order is time order, for
// times before 1970 too (the sign bit flipped).
func timeKey(ns int64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(ns)^(1<<63))
	return k[:]
}

// keyTime decodes timeKey.
func keyTime(k []byte) int64 { return int64(binary.BigEndian.Uint64(k) ^ (1 << 63)) }

// sample is one recorded value: unix nanoseconds, quality, raw status
// code, value.
type sample struct {
	t  int64
	q  value.Quality
	sc uint32
	v  value.Value
}

// qualityHasCode is the flag bit of a quality byte followed by a status
// code; value.Quality uses the low 7 bits.
const qualityHasCode = 0x80

// appendQuality appends a sample's quality byte, and its status code when
// it has one.
func appendQuality(b []byte, q value.Quality, sc uint32) []byte {
	if sc == 0 {
		return append(b, byte(q))
	}
	return binary.AppendUvarint(append(b, byte(q)|qualityHasCode), uint64(sc))
}

// readQuality decodes appendQuality's bytes at the start of b and returns
// the quality, the status code and the bytes used.
func readQuality(b []byte) (value.Quality, uint32, int, error) {
	if len(b) == 0 {
		return 0, 0, 0, errBlockCorrupt
	}
	q := value.Quality(b[0] &^ qualityHasCode)
	if b[0]&qualityHasCode == 0 {
		return q, 0, 1, nil
	}
	sc, n := binary.Uvarint(b[1:])
	if n <= 0 || sc > 0xFFFFFFFF {
		return 0, 0, 0, errBlockCorrupt
	}
	return q, uint32(sc), 1 + n, nil
}

// appendHistValue appends v's kind byte and bytes. Values outside value.Value's
// kinds are an error.
func appendHistValue(b []byte, v value.Value) ([]byte, error) {
	switch x := value.Normalize(v).(type) {
	case nil:
		return append(b, hkNil), nil
	case bool:
		if x {
			return append(b, hkTrue), nil
		}
		return append(b, hkFalse), nil
	case int64:
		return binary.AppendVarint(append(b, hkInt), x), nil
	case uint64:
		return binary.AppendUvarint(append(b, hkUint), x), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(b, hkFloat), math.Float64bits(x)), nil
	case string:
		if len(x) > maxSampleBytes {
			return b, fmt.Errorf("string value of %d bytes is over %d", len(x), maxSampleBytes)
		}
		b = binary.AppendUvarint(append(b, hkString), uint64(len(x)))
		return append(b, x...), nil
	case []any:
		j, err := json.Marshal(x)
		if err != nil {
			return b, err
		}
		if len(j) > maxSampleBytes {
			return b, fmt.Errorf("array value of %d bytes is over %d", len(j), maxSampleBytes)
		}
		b = binary.AppendUvarint(append(b, hkJSON), uint64(len(j)))
		return append(b, j...), nil
	}
	return b, fmt.Errorf("value of type %T cannot be recorded", v)
}

// readHistValue decodes one value at the start of b and returns it with the
// bytes it used.
func readHistValue(b []byte) (value.Value, int, error) {
	if len(b) == 0 {
		return nil, 0, errBlockCorrupt
	}
	switch b[0] {
	case hkNil:
		return nil, 1, nil
	case hkFalse:
		return false, 1, nil
	case hkTrue:
		return true, 1, nil
	case hkInt:
		x, n := binary.Varint(b[1:])
		if n <= 0 {
			return nil, 0, errBlockCorrupt
		}
		return x, 1 + n, nil
	case hkUint:
		x, n := binary.Uvarint(b[1:])
		if n <= 0 {
			return nil, 0, errBlockCorrupt
		}
		return x, 1 + n, nil
	case hkFloat:
		if len(b) < 9 {
			return nil, 0, errBlockCorrupt
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b[1:9])), 9, nil
	case hkString, hkJSON:
		l, n := binary.Uvarint(b[1:])
		if n <= 0 || uint64(len(b)-1-n) < l {
			return nil, 0, errBlockCorrupt
		}
		raw := b[1+n : 1+n+int(l)]
		if b[0] == hkString {
			return string(raw), 1 + n + int(l), nil
		}
		var arr []any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&arr); err != nil {
			return nil, 0, fmt.Errorf("%w: %v", errBlockCorrupt, err)
		}
		return value.Normalize(arr), 1 + n + int(l), nil
	}
	return nil, 0, fmt.Errorf("%w: value kind %d", errBlockCorrupt, b[0])
}

// blockBuf is a block being built: samples appended in arrival order.
// base is the first sample's time (the delta origin), min and max the
// range, sorted whether every sample came at or after the previous one.
type blockBuf struct {
	base, prev int64
	min, max   int64
	count      int
	sorted     bool
	data       []byte // samples only, no header
}

// full reports whether the block should take no more samples.
func (bb *blockBuf) full() bool { return bb.count >= blockMaxCount || len(bb.data) >= blockMaxBytes }

// add appends s. The value must already have been checked by appendHistValue
// (the journal did), so an error here is a programming error.
func (bb *blockBuf) add(s sample) error {
	if bb.count == 0 {
		bb.base, bb.prev, bb.min, bb.max, bb.sorted = s.t, s.t, s.t, s.t, true
	}
	if s.t < bb.prev {
		bb.sorted = false
	}
	d := bb.data
	d = binary.AppendVarint(d, s.t-bb.prev)
	d = appendQuality(d, s.q, s.sc)
	d, err := appendHistValue(d, s.v)
	if err != nil {
		return err
	}
	bb.data = d
	bb.prev = s.t
	bb.min, bb.max = min(bb.min, s.t), max(bb.max, s.t)
	bb.count++
	return nil
}

// encode returns the block with its header. It must be sorted (base ==
// min).
func (bb *blockBuf) encode() []byte {
	out := make([]byte, blockHeader, blockHeader+len(bb.data))
	out[0] = blockVersion
	binary.BigEndian.PutUint64(out[1:9], uint64(bb.base))
	binary.BigEndian.PutUint64(out[9:17], uint64(bb.max))
	binary.BigEndian.PutUint32(out[17:21], uint32(bb.count))
	return append(out, bb.data...)
}

// each calls fn for every sample of the (header-less) data with delta
// origin base, in stored order.
func eachSample(data []byte, base int64, count int, fn func(sample) bool) error {
	t := base
	for i := 0; i < count; i++ {
		d, n := binary.Varint(data)
		if n <= 0 {
			return errBlockCorrupt
		}
		t += d
		q, sc, qn, err := readQuality(data[n:])
		if err != nil {
			return err
		}
		v, m, err := readHistValue(data[n+qn:])
		if err != nil {
			return err
		}
		data = data[n+qn+m:]
		if !fn(sample{t: t, q: q, sc: sc, v: v}) {
			return nil
		}
	}
	return nil
}

// blockInfo is a persisted block's header.
type blockInfo struct {
	first, last int64
	count       int
}

func readBlockHeader(b []byte) (blockInfo, error) {
	if len(b) < blockHeader || b[0] != blockVersion {
		return blockInfo{}, fmt.Errorf("%w: header", errBlockCorrupt)
	}
	return blockInfo{
		first: int64(binary.BigEndian.Uint64(b[1:9])),
		last:  int64(binary.BigEndian.Uint64(b[9:17])),
		count: int(binary.BigEndian.Uint32(b[17:21])),
	}, nil
}

// decodeBlock calls fn for each sample of a persisted block, in time order.
func decodeBlock(b []byte, fn func(sample) bool) error {
	h, err := readBlockHeader(b)
	if err != nil {
		return err
	}
	return eachSample(b[blockHeader:], h.first, h.count, fn)
}

// appendBlockSamples appends the samples of a persisted block to out.
func appendBlockSamples(out []sample, b []byte) ([]sample, error) {
	err := decodeBlock(b, func(s sample) bool { out = append(out, s); return true })
	return out, err
}

// encodeSorted packs sorted samples into blocks of at most blockMaxCount
// samples.
func encodeSorted(ss []sample) ([]*blockBuf, error) {
	var out []*blockBuf
	var cur *blockBuf
	for _, s := range ss {
		if cur == nil || cur.full() {
			cur = &blockBuf{}
			out = append(out, cur)
		}
		if err := cur.add(s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sortSamples sorts by time, keeping arrival order among equal times.
func sortSamples(ss []sample) {
	slices.SortStableFunc(ss, func(a, b sample) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
}

// nsTime converts unix nanoseconds to a UTC time.
func nsTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }
