// Package engine is the one machinery behind every event-based clientset of
// workwire (package resource, and work and registration on it): a Holder
// owns a transport, the generic client over it, a store with apiserver
// semantics (internal/store) and the informers over that store, and hands
// out a client-go style typed client of each namespace (Namespaced).
//
// What differs by side is a backend: on a hub (hub.go) the store is the
// truth, writes become spec events through a publisher that retries them,
// and agents' statuses land in the store; on an agent (agent.go) specs from
// sources arrive in the store and status writes become status events; a
// mirror (mirror.go) is the agent side of a type the hub keeps whole, whose
// writes are requests to the hub's Service. A Kind describes a type to the
// engine once — how to copy it, compare and set its spec and status, tell
// from its status that an agent deleted it — so a new type is a codec and
// a Kind, never a new engine.
package engine
