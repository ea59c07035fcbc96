package generic

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/workwire/sdk-go/generic/types"
)

// codecs finds a codec by data type, under its plural (emitted) and singular
// (accepted from peers that send it) names.
type codecs[T Object] struct {
	byType map[types.DataType]*codecOf[T]
	list   []*codecOf[T]
}

// codecOf is a registered codec and its data type, asked once.
type codecOf[T Object] struct {
	Codec[T]
	dt        types.DataType
	name      string       // dt.String()
	versioner Versioner[T] // nil if it is none
	clusterer Clusterer[T] // nil if it is none
}

func newCodecs[T Object](cs []Codec[T]) (*codecs[T], error) {
	if len(cs) == 0 {
		return nil, errors.New("codecs: none given")
	}
	r := &codecs[T]{byType: make(map[types.DataType]*codecOf[T], 2*len(cs))}
	var errs []error
	for i, c := range cs {
		if c == nil {
			errs = append(errs, fmt.Errorf("codecs[%d] is nil", i))
			continue
		}
		dt := c.DataType()
		if err := dt.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("codecs[%d]: %w", i, err))
			continue
		}
		if _, dup := r.byType[dt]; dup {
			errs = append(errs, fmt.Errorf("codecs[%d]: second codec for %s", i, dt))
			continue
		}
		reg := &codecOf[T]{Codec: c, dt: dt, name: dt.String()}
		reg.versioner, _ = c.(Versioner[T])
		reg.clusterer, _ = c.(Clusterer[T])
		r.byType[dt] = reg
		if s := dt.Singular(); s != dt {
			if _, taken := r.byType[s]; !taken {
				r.byType[s] = reg
			}
		}
		r.list = append(r.list, reg)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// version is obj's version on the wire: what its codec says (Versioner),
// else its generation.
func (c *codecOf[T]) version(obj T) int64 {
	if c.versioner != nil {
		return c.versioner.Version(obj)
	}
	return obj.GetGeneration()
}

// cluster is the cluster a source sends obj to: its namespace, or what
// its codec says (Clusterer).
func (c *codecOf[T]) cluster(obj T) string {
	if c.clusterer != nil {
		return c.clusterer.ClusterOf(obj)
	}
	return obj.GetNamespace()
}

func (r *codecs[T]) get(dt types.DataType) (*codecOf[T], error) {
	if c, ok := r.byType[dt]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w %s", ErrUnknownDataType, dt)
}

// select returns the codecs for dt, or all of them for the zero DataType.
func (r *codecs[T]) selectFor(dt types.DataType) ([]*codecOf[T], error) {
	if dt.IsZero() {
		return r.list, nil
	}
	c, err := r.get(dt)
	if err != nil {
		return nil, err
	}
	return []*codecOf[T]{c}, nil
}

func (r *codecs[T]) dataTypeNames() []string {
	names := make([]string, len(r.list))
	for i, c := range r.list {
		names[i] = c.name
	}
	return names
}

// sequence issues the sequenceid of an agent's status events, in the
// format OCM sources parse them: a Twitter-format snowflake ID, the decimal
// form of 41 bits of milliseconds since snowflakeEpoch, 10 bits of node and
// 12 bits of step. An OCM source drops, and never asks again for, a status
// whose ID names another node than the last one it stored for the work, so
// every agent uses node 1, as OCM agents do.
//
// The sequence counts ticks — a millisecond's 4,096 steps each — and a
// tick's ID is its millisecond and step with the node between them, so IDs
// increase as ticks do. It is strictly increasing within a process, and
// across restarts as long as the wall clock does not go back: each tick is
// at least the current millisecond's first. Reserving a block (for a resync
// answer) moves the sequence ahead of the clock by the block's size, a
// millisecond per 4,096 IDs. An agent's spec resync carries where its
// sequence stands, and workwire sources forget the marks above it, so a
// clock that did go back heals at the agent's next resync (one on every
// start).
type sequence struct {
	last atomic.Uint64 // the last tick issued
	now  func() time.Time
}

// Snowflake layout of sequence IDs.
const (
	snowflakeEpoch = 1288834974657 // Twitter's epoch, in Unix milliseconds
	snowflakeNode  = 1
	stepBits       = 12
	nodeBits       = 10
	maxMillis      = 1<<41 - 1
)

func (s *sequence) next() uint64 { return s.reserve(1) }

// reserve returns the first of n ticks, first to first+n-1, that are above
// every tick issued before and below every tick issued after.
func (s *sequence) reserve(n uint64) uint64 {
	for {
		prev := s.last.Load()
		floor := uint64(0)
		if ms := s.now().UnixMilli() - snowflakeEpoch; ms > 0 && ms <= maxMillis {
			floor = uint64(ms) << stepBits
		}
		first := max(prev+1, floor)
		if s.last.CompareAndSwap(prev, first+n-1) {
			return first
		}
	}
}

// sequenceID returns the decimal snowflake ID of tick.
func sequenceID(tick uint64) string {
	ms, step := tick>>stepBits, tick&(1<<stepBits-1)
	return strconv.FormatUint(ms<<(nodeBits+stepBits)|snowflakeNode<<stepBits|step, 10)
}
