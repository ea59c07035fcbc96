package pending_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/workwire/sdk-go/pending"
)

// reporter reports one spec, and remembers the query it was asked.
type reporter struct{ asked pending.Query }

func (r *reporter) Pending(q pending.Query) pending.Report {
	r.asked = q
	if q.Cluster == "none" {
		return pending.Report{Time: time.Unix(0, 0)}
	}
	return pending.Report{Time: time.Unix(0, 0).UTC(), Waiting: 1, OldestSeconds: 2, ClustersWaiting: 1,
		Clusters: []pending.Cluster{{Name: "c1", DataType: "works", Waiting: 1, OldestSeconds: 2}},
		Specs:    []pending.Spec{{Cluster: "c1", DataType: "works", ResourceID: "u1", Name: "c1/w1", Version: 3, AgeSeconds: 2, Resends: 1}}}
}

func TestHandler(t *testing.T) {
	r := &reporter{}
	srv := httptest.NewServer(pending.Handler(r))
	defer srv.Close()
	for _, tc := range []struct {
		query string
		code  int
		asked pending.Query
		body  string
	}{
		{query: "", code: http.StatusOK, asked: pending.Query{}, body: `"name": "c1/w1"`},
		{query: "?cluster=c1&top=5", code: http.StatusOK, asked: pending.Query{Cluster: "c1", Top: 5}, body: `"resends": 1`},
		{query: "?cluster=none", code: http.StatusOK, asked: pending.Query{Cluster: "none"}, body: `"specs": []`},
		{query: "?top=0", code: http.StatusBadRequest, body: "top \"0\": want 1 to 10000"},
		{query: "?top=10001", code: http.StatusBadRequest, body: "want 1 to 10000"},
		{query: "?top=x", code: http.StatusBadRequest, body: "want 1 to 10000"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r.asked = pending.Query{}
			resp, err := http.Get(srv.URL + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body := string(data)
			if resp.StatusCode != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("%d %s, want %d and %q", resp.StatusCode, body, tc.code, tc.body)
			}
			if diff := cmp.Diff(tc.asked, r.asked); tc.code == http.StatusOK && diff != "" {
				t.Errorf("query (-want +got):\n%s", diff)
			}
			if tc.code == http.StatusOK {
				var got pending.Report
				if err := json.Unmarshal(data, &got); err != nil || got.Clusters == nil || got.Specs == nil {
					t.Errorf("the report does not read back with its lists (%v): %s", err, body)
				}
			}
		})
	}
	resp, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}
