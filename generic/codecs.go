package generic

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/workwire/sdk-go/generic/types"
)

// codecs finds a codec by data type, under its plural (emitted) and singular
// (accepted from seed 000's examples) names.
type codecs[T Object] struct {
	byType map[types.DataType]Codec[T]
	list   []Codec[T]
}

func newCodecs[T Object](cs []Codec[T]) (*codecs[T], error) {
	if len(cs) == 0 {
		return nil, errors.New("codecs: none given")
	}
	r := &codecs[T]{byType: make(map[types.DataType]Codec[T], 2*len(cs))}
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
		r.byType[dt] = c
		if s := dt.Singular(); s != dt {
			if _, taken := r.byType[s]; !taken {
				r.byType[s] = c
			}
		}
		r.list = append(r.list, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

func (r *codecs[T]) get(dt types.DataType) (Codec[T], error) {
	if c, ok := r.byType[dt]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w %s", ErrUnknownDataType, dt)
}

// select returns the codecs for dt, or all of them for the zero DataType.
func (r *codecs[T]) selectFor(dt types.DataType) ([]Codec[T], error) {
	if dt.IsZero() {
		return r.list, nil
	}
	c, err := r.get(dt)
	if err != nil {
		return nil, err
	}
	return []Codec[T]{c}, nil
}

func (r *codecs[T]) dataTypeNames() []string {
	names := make([]string, len(r.list))
	for i, c := range r.list {
		names[i] = c.DataType().String()
	}
	return names
}

// sequence issues the sequenceid of an agent's status events: strictly
// increasing within a process, and across restarts as long as the wall clock
// does not go back, because each ID is at least the current Unix millisecond
// shifted left by 20 bits (a million IDs per millisecond before it runs
// ahead of the clock). An agent's spec resync carries where its sequence
// stands, and sources forget the marks above it, so a clock that did go
// back heals at the agent's next resync (one on every start).
type sequence struct {
	last atomic.Uint64
	now  func() time.Time
}

func (s *sequence) next() uint64 { return s.reserve(1) }

// reserve returns the first of n IDs, first to first+n-1, that are above
// every ID issued before and below every ID issued after.
func (s *sequence) reserve(n uint64) uint64 {
	for {
		prev := s.last.Load()
		ms := s.now().UnixMilli()
		floor := uint64(0)
		if ms > 0 && ms < math.MaxInt64>>20 {
			floor = uint64(ms) << 20
		}
		first := max(prev+1, floor)
		if s.last.CompareAndSwap(prev, first+n-1) {
			return first
		}
	}
}
