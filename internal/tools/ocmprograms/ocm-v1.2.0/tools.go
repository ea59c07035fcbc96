//go:build tools

// Package ocmprograms pins OCM's own released programs that the
// internal/tests/interop suite runs as processes beside workwire: the
// klusterlet's registration agent (cmd/registration), OCM's work agent
// (cmd/work) and the hub's gRPC server (cmd/server), all of
// open-cluster-management.io/ocm v1.2.0 with the dependency versions OCM
// released them with. A module of its own, so neither the main module nor
// the interop suite resolves OCM's dependencies. Build them with
//
//	go build -o registration open-cluster-management.io/ocm/cmd/registration
//
// (likewise cmd/work and cmd/server) from this directory; .ci/run does,
// once per version, into a cache outside the clone.
package ocmprograms

import (
	_ "open-cluster-management.io/ocm/cmd/registration"
	_ "open-cluster-management.io/ocm/cmd/server"
	_ "open-cluster-management.io/ocm/cmd/work"
)
