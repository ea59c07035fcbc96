// Package pgstore keeps ManifestWorks and their statuses in PostgreSQL
// (pgx), for a service over its own database: a REST API writes works
// into a Store, and the Store feeds what delivers them — a generic source
// client over MQTT or Kafka (workstore.Lister and workstore.StatusHandler,
// with codec.StatusHash), or the gRPC broker.
//
// The Store behaves as a kube-apiserver does for a work: Create gives it a
// UID, generation 1 and a resourceVersion (the row's revision, new at every
// write); Update must name the resourceVersion it read (else Conflict) and
// raises the generation when the spec changes; Delete marks it, and it
// stays until its agent reports it Deleted. A status is stored only over
// an older one — by the generation it reports on, then the agent's
// sequence (generic.StatusOrder) — so redelivered and reordered statuses
// change nothing, whichever replica writes them.
//
// Several replicas share one database: Watch tells each of every change,
// whoever made it (PostgreSQL's LISTEN/NOTIFY, with a catch-up after a lost
// connection). Open creates and migrates the schema, versioned, once, in
// the first schema of the pool's search_path.
package pgstore
