package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	workv1 "open-cluster-management.io/api/work/v1"
)

// session drives the API as a user's curl would, and checks each answer.
type session struct {
	ctx     context.Context
	client  *http.Client
	base    string
	out     io.Writer
	answers int
}

func workJSON(name, app, data string) string {
	return `{"metadata":{"name":"` + name + `","labels":{"app":"` + app + `"}},"spec":{"workload":{"manifests":[` +
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"default"},"data":{"v":"` + data + `"}}]}}}`
}

// call makes one request and checks its status code.
func (s *session) call(method, path, body string, want int) ([]byte, error) {
	shown := body
	if len(shown) > 100 {
		shown = shown[:100] + "…"
	}
	cmd := "curl -s -X" + method + " '" + s.base + path + "'"
	if body != "" {
		cmd += " -d '" + shown + "'"
	}
	req, err := http.NewRequestWithContext(s.ctx, method, s.base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(s.out, "$ %s\n  → %d %s\n", cmd, resp.StatusCode, summary(data))
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s: %d, want %d: %s", cmd, resp.StatusCode, want, data)
	}
	s.answers++
	return data, nil
}

// summary is what of an answer the demonstration prints.
func summary(data []byte) string {
	var v struct {
		Kind     string `json:"kind"`
		Message  string `json:"message"`
		Metadata struct {
			Name, ResourceVersion, Continue string
			Generation                      int64
			DeletionTimestamp               *string
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	switch {
	case v.Kind == "Status":
		return v.Message
	case v.Items != nil || v.Kind == "ManifestWorkList":
		more := ""
		if v.Metadata.Continue != "" {
			more = ", more follow"
		}
		return fmt.Sprintf("%d works%s", len(v.Items), more)
	case v.Metadata.Name != "":
		s := fmt.Sprintf("%s, generation %d, resourceVersion %s", v.Metadata.Name, v.Metadata.Generation, v.Metadata.ResourceVersion)
		if v.Metadata.DeletionTimestamp != nil {
			s += ", being deleted"
		}
		return s
	}
	return strings.TrimSpace(string(data))
}

// until calls path every 50ms until check accepts its answer, printing
// only the last call.
func (s *session) until(what, path string, want int, check func([]byte) bool) ([]byte, error) {
	for {
		req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.base+path, nil)
		if err != nil {
			return nil, err
		}
		resp, err := s.client.Do(req)
		if err == nil {
			data, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == want && check(data) {
				return s.call(http.MethodGet, path, "", want)
			}
		}
		select {
		case <-s.ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, context.Cause(s.ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func applied(generation int64) func([]byte) bool {
	return func(data []byte) bool {
		var w workv1.ManifestWork
		if json.Unmarshal(data, &w) != nil {
			return false
		}
		c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
		return c != nil && c.Status == "True" && c.ObservedGeneration == generation
	}
}

// demo runs the session against the API at base.
func demo(ctx context.Context, base string, out io.Writer) error {
	s := &session{ctx: ctx, client: &http.Client{Transport: &http.Transport{}}, base: base, out: out}
	defer s.client.CloseIdleConnections()
	steps := []func() error{
		func() error {
			for _, c := range []struct{ cluster, name, app string }{{"cluster1", "web", "web"}, {"cluster1", "db", "db"}, {"cluster2", "web", "web"}} {
				if _, err := s.call(http.MethodPost, "/clusters/"+c.cluster+"/works", workJSON(c.name, c.app, "1"), http.StatusCreated); err != nil {
					return err
				}
			}
			_, err := s.call(http.MethodPost, "/clusters/cluster1/works", workJSON("web", "web", "1"), http.StatusConflict)
			return err
		},
		func() error {
			fmt.Fprintln(out, "# bad requests: nothing is written")
			for _, c := range []struct {
				path, body string
				want       int
			}{
				{"/clusters/cluster1/works", `{"metadata":{"name":"x"`, http.StatusBadRequest},
				{"/clusters/cluster1/works", `{"metadata":{"name":"x"},"spek":{}}`, http.StatusBadRequest},
				{"/clusters/Cluster_1/works", workJSON("x", "x", "1"), http.StatusBadRequest},
				{"/clusters/cluster1/works", `{"metadata":{"name":"x"},"spec":{"workload":{"manifests":[{"metadata":{"name":"no-kind"}}]}}}`, http.StatusUnprocessableEntity},
				{"/clusters/cluster1/works", workJSON("huge", "x", strings.Repeat("x", maxBodyBytes)), http.StatusRequestEntityTooLarge},
			} {
				if _, err := s.call(http.MethodPost, c.path, c.body, c.want); err != nil {
					return err
				}
			}
			_, err := s.call(http.MethodGet, "/clusters/cluster1/works/x", "", http.StatusNotFound)
			return err
		},
		func() error {
			fmt.Fprintln(out, "# the agents apply the works and report back")
			for _, p := range []string{"/clusters/cluster1/works/web", "/clusters/cluster1/works/db", "/clusters/cluster2/works/web"} {
				if _, err := s.until(p+" applied", p, http.StatusOK, applied(1)); err != nil {
					return err
				}
			}
			_, err := s.call(http.MethodGet, "/clusters/cluster1/works/web/status", "", http.StatusOK)
			return err
		},
		func() error {
			fmt.Fprintln(out, "# an update names the version it read; a stale one is a conflict")
			data, err := s.call(http.MethodGet, "/clusters/cluster1/works/web", "", http.StatusOK)
			if err != nil {
				return err
			}
			var cur workv1.ManifestWork
			if err := json.Unmarshal(data, &cur); err != nil {
				return err
			}
			next := strings.Replace(workJSON("web", "web", "2"), `"name":"web","labels"`, `"name":"web","resourceVersion":"`+cur.ResourceVersion+`","labels"`, 1)
			if _, err := s.call(http.MethodPut, "/clusters/cluster1/works/web", next, http.StatusOK); err != nil {
				return err
			}
			if _, err := s.call(http.MethodPut, "/clusters/cluster1/works/web", next, http.StatusConflict); err != nil {
				return err
			}
			_, err = s.until("the update applied", "/clusters/cluster1/works/web", http.StatusOK, applied(2))
			return err
		},
		func() error {
			fmt.Fprintln(out, "# lists select by label, and page")
			data, err := s.call(http.MethodGet, "/works?labelSelector=app%3Dweb&limit=1", "", http.StatusOK)
			if err != nil {
				return err
			}
			var page workv1.ManifestWorkList
			if err := json.Unmarshal(data, &page); err != nil {
				return err
			}
			if len(page.Items) != 1 || page.Continue == "" {
				return fmt.Errorf("the first page: %d works, continue %q; want one, and more", len(page.Items), page.Continue)
			}
			data, err = s.call(http.MethodGet, "/works?labelSelector=app%3Dweb&limit=1&continue="+page.Continue, "", http.StatusOK)
			if err != nil {
				return err
			}
			var last workv1.ManifestWorkList
			if err := json.Unmarshal(data, &last); err != nil {
				return err
			}
			if len(last.Items) != 1 || last.Continue != "" {
				return fmt.Errorf("the last page: %d works, continue %q; want one, and no more", len(last.Items), last.Continue)
			}
			_, err = s.call(http.MethodGet, "/works?labelSelector=app%3E1", "", http.StatusBadRequest)
			return err
		},
		func() error {
			fmt.Fprintln(out, "# a delete is held until the agent reports the work Deleted")
			if _, err := s.call(http.MethodDelete, "/clusters/cluster1/works/db", "", http.StatusAccepted); err != nil {
				return err
			}
			if _, err := s.until("the work gone", "/clusters/cluster1/works/db", http.StatusNotFound, func([]byte) bool { return true }); err != nil {
				return err
			}
			_, err := s.call(http.MethodDelete, "/clusters/cluster1/works/db", "", http.StatusNotFound)
			return err
		},
		func() error {
			fmt.Fprintln(out, "# the demonstration leaves the database as it found it")
			for _, p := range []string{"/clusters/cluster1/works/web", "/clusters/cluster2/works/web"} {
				if _, err := s.call(http.MethodDelete, p, "", http.StatusAccepted); err != nil {
					return err
				}
			}
			_, err := s.until("every work gone", "/works", http.StatusOK, func(data []byte) bool {
				var l workv1.ManifestWorkList
				return json.Unmarshal(data, &l) == nil && len(l.Items) == 0
			})
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "all %d answers as expected\n", s.answers)
	return nil
}
