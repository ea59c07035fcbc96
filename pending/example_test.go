package pending_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/workwire/sdk-go/pending"
)

// waiting stands in for a hub's holder (work.ClientHolder), a source
// client or the gRPC broker: each is a pending.Reporter.
type waiting struct{}

func (waiting) Pending(q pending.Query) pending.Report {
	return pending.Report{Time: time.Now(), Waiting: 1, ClustersWaiting: 1,
		Clusters: []pending.Cluster{{Name: "cluster1", DataType: "works", Waiting: 1}},
		Specs:    []pending.Spec{{Cluster: "cluster1", DataType: "works", ResourceID: "uid-1", Name: "cluster1/w1", Version: 2}}}
}

// A hub serves its report on its admin port, where `workwire pending`
// reads it.
func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle(pending.DefaultPath, pending.Handler(waiting{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + pending.DefaultPath + "?top=10")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var r pending.Report
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Waiting, r.Specs[0].Name, r.Specs[0].Version)
	// Output: 1 cluster1/w1 2
}
