package generic_test

import (
	"context"
	"testing"

	"github.com/workwire/sdk-go/generic"
)

func TestStatusOrderReplaces(t *testing.T) {
	v := func(version int64, seq uint64) generic.StatusOrder {
		return generic.StatusOrder{Version: version, Sequence: seq, HasSequence: true}
	}
	for _, c := range []struct {
		a, b generic.StatusOrder
		want bool
	}{
		{v(2, 1), v(1, 9), true},                         // a newer version
		{v(1, 9), v(2, 1), false},                        // an older one
		{v(2, 2), v(2, 1), true},                         // a later sequence
		{v(2, 2), v(2, 2), false},                        // a redelivery
		{v(2, 1), v(2, 2), false},                        // overtaken
		{generic.StatusOrder{Version: 2}, v(2, 5), true}, // no sequence: not ordered within a version
		{v(2, 5), generic.StatusOrder{Version: 2}, true},
		{generic.StatusOrder{Version: 1}, generic.StatusOrder{Version: 2}, false},
	} {
		if got := c.a.Replaces(c.b); got != c.want {
			t.Errorf("%+v replaces %+v: %v, want %v", c.a, c.b, got, c.want)
		}
	}
	if _, ok := generic.StatusOrderFrom(context.Background()); ok {
		t.Error("an order in a context that has none")
	}
}
