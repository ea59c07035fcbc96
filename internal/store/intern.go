package store

import (
	"hash/maphash"
	"maps"
)

// Bounds of a store's interned maps.
const (
	// maxInterned is how many distinct maps the interner remembers; it
	// forgets them all when it is full, so objects whose labels are all
	// distinct cost it a bounded amount and no more.
	maxInterned = 1024
	// maxInternedEntries is the largest map it interns: label and
	// annotation sets shared by many objects are small.
	maxInternedEntries = 16
)

// interner makes stored objects with equal labels (or equal annotations)
// share one map. Stored objects are immutable, and the works of one source
// mostly carry the same few labels — and on an agent the same source
// annotation — which as a map of their own cost each object about 300
// bytes. Copies handed out (Get, List, watch events, what an Update
// function gets) have maps of their own, as before.
type interner struct {
	seed maphash.Seed
	maps map[uint64]map[string]string
}

func newInterner() *interner {
	return &interner{seed: maphash.MakeSeed(), maps: make(map[uint64]map[string]string)}
}

// intern returns the map equal to m that it remembers, or m, which it then
// remembers. The caller holds the store's write lock.
func (in *interner) intern(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > maxInternedEntries {
		return m
	}
	h := in.hash(m)
	if known, ok := in.maps[h]; ok {
		if maps.Equal(known, m) {
			return known
		}
		return m // a collision: keep the one remembered
	}
	if len(in.maps) >= maxInterned {
		clear(in.maps)
	}
	in.maps[h] = m
	return m
}

// hash is independent of the map's iteration order: the sum of its
// entries' hashes.
func (in *interner) hash(m map[string]string) uint64 {
	var sum uint64
	var h maphash.Hash
	h.SetSeed(in.seed)
	for k, v := range m {
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(v)
		sum += h.Sum64()
	}
	return sum
}
