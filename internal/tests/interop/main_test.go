package interop

import (
	"os"
	"testing"

	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// What nobody's context catches: shown with WORKWIRE_INTEROP_LOG only.
	klog.SetLogger(newLogCounter().logger())
	os.Exit(m.Run())
}
