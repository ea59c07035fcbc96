//go:build tools

// Package kubeapiserver pins the kube-apiserver that the tests of the hub
// Services run against (see internal/testsupport/kubetest): k8s.io/kubernetes at the
// version of the client-go the main module uses, with its staging modules
// replaced by their released versions, as k8s.io/kubernetes itself
// requires them at v0.0.0 from its own tree. A module of its own, so the
// main module never depends on k8s.io/kubernetes. Build it with
//
//	go build -o kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
//
// from this directory; .ci/run does, once per version, into a cache
// outside the clone.
package kubeapiserver

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
