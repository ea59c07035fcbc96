// Package types holds the vocabulary of the workwire wire contract: the
// CloudEvents type grammar ("<reverse group>.<version>.<resource>.<subresource>.<action>"),
// the extension attribute names and their typed getters, and the payloads of
// spec and status resync requests, and the batching that splits a resync
// request where the transport's size limit demands it.
//
// Everything here is pure and goroutine-safe. Nothing here panics on input
// from the network: malformed types and extensions are returned as errors
// wrapping ErrInvalidType or ErrExtension.
package types
