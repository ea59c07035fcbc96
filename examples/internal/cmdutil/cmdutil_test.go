package cmdutil

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

func TestReadinessProbe(t *testing.T) {
	var out bytes.Buffer
	notConnected := errors.New("not connected to MQTT broker 127.0.0.1:1883")
	var ready atomic.Bool
	stop, err := ServeReadiness("127.0.0.1:0", func() error {
		if ready.Load() {
			return nil
		}
		return notConnected
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	url := regexp.MustCompile(`http://\S+/readyz`).FindString(out.String())
	get := func() (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	if code, body := get(); code != http.StatusServiceUnavailable || body != notConnected.Error() {
		t.Errorf("unhealthy: %d %q", code, body)
	}
	ready.Store(true)
	if code, body := get(); code != http.StatusOK || body != "ok" {
		t.Errorf("healthy: %d %q", code, body)
	}
}
