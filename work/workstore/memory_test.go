package workstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/work/workstore"
	"github.com/workwire/sdk-go/work/workstore/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) workstore.Store { return workstore.NewMemory() })
}
