//go:build !race

package pubsub_test

// raceEnabled says whether the race detector is on.
const raceEnabled = false
