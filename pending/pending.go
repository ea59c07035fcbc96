// Package pending reports what a hub still waits for: the specs its source
// client (or the gRPC broker, for the data types its Services back) sent to
// agents and that no status has acknowledged yet, per cluster and per
// resource, with their versions, ages and re-sends. Handler serves a
// Report over HTTP, as JSON, at the path DefaultPath by convention, where
// `workwire pending` reads it:
//
//	mux.Handle(pending.DefaultPath, pending.Handler(holder))
//
// A Report names clusters and resources: serve it where only operators
// reach (a loopback or admin port), as metrics are.
package pending

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// DefaultPath is where programs serve the Handler.
const DefaultPath = "/debug/workwire/pending"

// Bounds of Query.Top.
const (
	DefaultTop = 100
	MaxTop     = 10000
)

// Query selects what a Report holds.
type Query struct {
	// Cluster, if set, keeps the report to that cluster's agent.
	Cluster string
	// Top bounds the specs listed, the oldest first, and the clusters,
	// those that waited longest first: DefaultTop if 0, at most MaxTop.
	// Counts cover every spec and cluster whatever it says.
	Top int
}

// Report is what a hub waits for at one time.
type Report struct {
	// Time is when the report was taken.
	Time time.Time `json:"time"`
	// Waiting counts the specs waiting for an acknowledgement, held back
	// by pacing or in flight; OldestSeconds is how long the oldest has
	// waited since it was first sent.
	Waiting       int     `json:"waiting"`
	OldestSeconds float64 `json:"oldestSeconds"`
	// ClustersWaiting counts the agents with specs waiting (per cluster and
	// data type); Clusters are the Query.Top of them that have waited
	// longest, first.
	ClustersWaiting int       `json:"clustersWaiting"`
	Clusters        []Cluster `json:"clusters"`
	// Specs are the Query.Top oldest specs waiting, oldest first.
	Specs []Spec `json:"specs"`
}

// Cluster is what one agent (a cluster, for one data type) has not
// acknowledged.
type Cluster struct {
	Name     string `json:"name"`
	DataType string `json:"dataType"`
	// Waiting counts its specs waiting; Held those of them that pacing
	// holds back (not sent yet, for a slow agent).
	Waiting int `json:"waiting"`
	Held    int `json:"held"`
	// OldestSeconds is how long its oldest spec has waited.
	OldestSeconds float64 `json:"oldestSeconds"`
	// LastHeard is when the agent last reported a status or resynced,
	// zero if never since the hub started.
	LastHeard time.Time `json:"lastHeard,omitzero"`
}

// Spec is one spec waiting for an acknowledgement.
type Spec struct {
	Cluster    string `json:"cluster"`
	DataType   string `json:"dataType"`
	ResourceID string `json:"resourceID"`
	// Name is the resource's namespace/name, where the reporter knows it.
	Name string `json:"name,omitempty"`
	// Version is the resource version sent.
	Version int64 `json:"version"`
	// AgeSeconds is how long since this version was first sent (or held
	// back).
	AgeSeconds float64 `json:"ageSeconds"`
	// Resends counts the times it was sent again.
	Resends int `json:"resends"`
	// Held says pacing holds it back: not sent yet.
	Held bool `json:"held,omitempty"`
}

// Reporter is what reports pending specs: the source clients
// (generic.SourceClient), the holders built on them (work.ClientHolder),
// and the gRPC broker (server.Server). Pending is goroutine-safe and does
// no I/O.
type Reporter interface {
	Pending(q Query) Report
}

// Handler serves r's Report as JSON to GET requests; the query parameters
// cluster and top fill the Query.
func Handler(r Reporter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q, err := ParseQuery(req.URL.Query().Get("cluster"), req.URL.Query().Get("top"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		report := r.Pending(q)
		if report.Clusters == nil {
			report.Clusters = []Cluster{}
		}
		if report.Specs == nil {
			report.Specs = []Spec{}
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report) // a client gone away is all that fails
	})
}

// ParseQuery reads a Query from the handler's parameters.
func ParseQuery(cluster, top string) (Query, error) {
	q := Query{Cluster: cluster}
	if top != "" {
		n, err := strconv.Atoi(top)
		if err != nil || n < 1 || n > MaxTop {
			return Query{}, fmt.Errorf("top %q: want 1 to %d", top, MaxTop)
		}
		q.Top = n
	}
	return q, nil
}

// Limit is q.Top with its default applied.
func (q Query) Limit() int {
	if q.Top <= 0 {
		return DefaultTop
	}
	return min(q.Top, MaxTop)
}
