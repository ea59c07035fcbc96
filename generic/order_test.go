package generic_test

import (
	"context"
	"testing"

	"github.com/workwire/sdk-go/generic"
)

func TestStatusOrderBefore(t *testing.T) {
	v := func(version int64, seq uint64) generic.StatusOrder {
		return generic.StatusOrder{Version: version, Sequence: seq, HasSequence: true}
	}
	for _, c := range []struct {
		a, b generic.StatusOrder
		want bool
	}{
		{v(1, 9), v(2, 1), true},
		{v(2, 1), v(1, 9), false},
		{v(2, 1), v(2, 2), true},
		{v(2, 2), v(2, 2), false},
		{v(2, 2), v(2, 1), false},
		{generic.StatusOrder{Version: 2}, v(2, 5), false}, // no sequence: not ordered within a version
		{generic.StatusOrder{Version: 1}, generic.StatusOrder{Version: 2}, true},
	} {
		if got := c.a.Before(c.b); got != c.want {
			t.Errorf("%+v before %+v: %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if _, ok := generic.StatusOrderFrom(context.Background()); ok {
		t.Error("an order in a context that has none")
	}
}
