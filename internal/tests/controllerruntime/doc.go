// Package controllerruntime is a module of its own that requires workwire
// together with sigs.k8s.io/controller-runtime, as an operator built on
// controller-runtime does: its test proves that the two resolve to versions
// that build and work together. The main module does not depend on
// controller-runtime.
package controllerruntime
