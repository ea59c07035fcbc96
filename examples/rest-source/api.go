package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/workwire/sdk-go/work/workstore"
)

// maxBodyBytes bounds a request's body: a larger work is refused (413).
const maxBodyBytes = 1 << 20

// api is the service's HTTP JSON API over its database of works:
//
//	POST   /clusters/{cluster}/works          create a work (201)
//	GET    /clusters/{cluster}/works          list a cluster's works (?labelSelector=&limit=&continue=)
//	GET    /works                             list every cluster's works (the same parameters)
//	GET    /clusters/{cluster}/works/{name}   get a work, with its status
//	PUT    /clusters/{cluster}/works/{name}   update it; metadata.resourceVersion says what it read (else 409)
//	DELETE /clusters/{cluster}/works/{name}   delete it (202): it stays, being deleted, until its agent reports it Deleted
//	GET    /clusters/{cluster}/works/{name}/status   its status alone
//
// Every error is a JSON body, a Kubernetes Status: its code, reason and
// message.
type api struct {
	store workstore.Store
}

func (a api) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /clusters/{cluster}/works", a.create)
	mux.HandleFunc("GET /clusters/{cluster}/works", a.list)
	mux.HandleFunc("GET /works", a.list)
	mux.HandleFunc("GET /clusters/{cluster}/works/{name}", a.get)
	mux.HandleFunc("PUT /clusters/{cluster}/works/{name}", a.update)
	mux.HandleFunc("DELETE /clusters/{cluster}/works/{name}", a.delete)
	mux.HandleFunc("GET /clusters/{cluster}/works/{name}/status", a.status)
	return mux
}

func (a api) create(w http.ResponseWriter, r *http.Request) {
	work, err := decode(w, r)
	if err == nil {
		err = bindNames(work, r.PathValue("cluster"), work.Name)
	}
	if err == nil {
		work, err = a.store.Create(r.Context(), work)
	}
	reply(w, http.StatusCreated, work, err)
}

func (a api) get(w http.ResponseWriter, r *http.Request) {
	work, err := a.store.Get(r.Context(), r.PathValue("cluster"), r.PathValue("name"))
	reply(w, http.StatusOK, work, err)
}

func (a api) status(w http.ResponseWriter, r *http.Request) {
	work, err := a.store.Get(r.Context(), r.PathValue("cluster"), r.PathValue("name"))
	if err != nil {
		reply[any](w, 0, nil, err)
		return
	}
	reply(w, http.StatusOK, &work.Status, nil)
}

func (a api) update(w http.ResponseWriter, r *http.Request) {
	work, err := decode(w, r)
	if err == nil {
		err = bindNames(work, r.PathValue("cluster"), r.PathValue("name"))
	}
	if err == nil {
		work, err = a.store.Update(r.Context(), work)
	}
	reply(w, http.StatusOK, work, err)
}

func (a api) delete(w http.ResponseWriter, r *http.Request) {
	work, err := a.store.Delete(r.Context(), r.PathValue("cluster"), r.PathValue("name"))
	reply(w, http.StatusAccepted, work, err)
}

func (a api) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := workstore.ListOptions{Cluster: r.PathValue("cluster"), Continue: q.Get("continue")}
	var err error
	if s := q.Get("labelSelector"); s != "" {
		if opts.Selector, err = labels.Parse(s); err != nil {
			reply[any](w, 0, nil, apierrors.NewBadRequest(fmt.Sprintf("labelSelector: %v", err)))
			return
		}
	}
	if s := q.Get("limit"); s != "" {
		if opts.Limit, err = strconv.Atoi(s); err != nil {
			reply[any](w, 0, nil, apierrors.NewBadRequest(fmt.Sprintf("limit %q: not a number", s)))
			return
		}
	}
	list, err := a.store.List(r.Context(), opts)
	reply(w, http.StatusOK, list, err)
}

// decode reads a work from the body, refusing what is not one: malformed
// JSON, unknown fields, trailing data (400), a body over maxBodyBytes (413).
func decode(w http.ResponseWriter, r *http.Request) (*workv1.ManifestWork, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	var work workv1.ManifestWork
	err := dec.Decode(&work)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the work")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("a work is at most %d bytes", maxBodyBytes))
	case err != nil:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a ManifestWork: %v", err))
	}
	return &work, nil
}

// bindNames puts the work in the cluster and under the name the path
// names; a body that names others is refused.
func bindNames(work *workv1.ManifestWork, cluster, name string) error {
	if work.Namespace != "" && work.Namespace != cluster {
		return apierrors.NewBadRequest(fmt.Sprintf("metadata.namespace %q: the path names cluster %q", work.Namespace, cluster))
	}
	if work.Name != name {
		return apierrors.NewBadRequest(fmt.Sprintf("metadata.name %q: the path names %q", work.Name, name))
	}
	work.Namespace = cluster
	return nil
}

// reply writes v with code, or err as a Status with its own code.
func reply[T any](w http.ResponseWriter, code int, v T, err error) {
	var body any = v
	if err != nil {
		status := apierrors.APIStatus(nil)
		if !errors.As(err, &status) {
			status = apierrors.NewInternalError(err)
		}
		st := status.Status()
		st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		code, body = int(st.Code), st
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
