// Package generic holds workwire's protocol clients: a SourceClient for hubs
// and services that send resources to clusters, and an AgentClient for the
// agents on those clusters. Both carry any T that satisfies Object, encoded
// by one Codec per data type, over any options.Transport.
//
// What the clients do for you:
//
//   - Receive fast: the transport's receive goroutine only parses the event
//     type and queues the event. Worker goroutines (WithWorkers) decode it and
//     run the handlers, one event per resource at a time, newest first: an
//     event for a resource that is still queued replaces the older one. Deletes
//     and resync work have lanes of their own, so neither starves the rest.
//   - Order: an agent drops specs older than the version it holds; a source
//     drops statuses older than one it handled (resourceversion, then
//     sequenceid).
//   - Heal: each side resyncs at start, after every reconnect, and every
//     resync interval. A source answers with every resource the agent lacks or
//     holds at an older version, and delete_requests for resources the agent
//     holds that the source no longer has; an agent answers with every status
//     whose hash differs. A resync request is one event, split into batches
//     only where the transport's known size limit (options.EventSizeLimiter)
//     demands it. A source also sends a spec again when no status at its
//     version acknowledges it (WithSpecResend), for agents that resync only
//     when they connect.
//   - Survive bad input: a malformed, foreign or undecodable event is counted
//     (Observer), reported (ErrorHandler) and skipped; nothing received panics
//     or stops the subscription.
//
// Handlers are called on worker goroutines, never concurrently for one
// resource, and may block (that slows only their worker). A handler error
// retries the event with backoff, unless a newer event for the resource came
// in meanwhile.
//
// Lifecycle: construct (no I/O), Subscribe, Start (connects), Publish and
// Resync from any goroutine, Close (idempotent; waits for every goroutine).
package generic
