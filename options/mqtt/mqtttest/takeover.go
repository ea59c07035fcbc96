package mqtttest

import (
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// takeoverWait bounds how long a connecting client waits for the broker to
// finish with the old connection of its client ID.
const takeoverWait = 5 * time.Second

// takeoverHook makes a client that connects with the ID of a connection
// the broker still serves wait until the broker is done with that one.
//
// mochi-mqtt (v2.7) cleans up a connection that ended on its own goroutine:
// if the client has not been taken over, it removes the client's
// subscriptions and then deletes the client's ID from its table. When the
// client reconnects in between — as ours do within milliseconds of a cut —
// the new connection is taken over from the old one and registered, and
// the old cleanup then deletes it: the new client stays connected and
// subscribed but gets nothing, and the server's Close waits for it for
// ever. Disconnecting the old connection first and waiting for its cleanup
// orders the two.
type takeoverHook struct {
	mochi.HookBase
	srv *mochi.Server
	ln  *listener
}

func (h *takeoverHook) ID() string { return "mqtttest-takeover" }

func (h *takeoverHook) Provides(b byte) bool { return b == mochi.OnConnect }

// OnConnect runs on the new client's goroutine before mochi looks for an
// existing session of its ID.
func (h *takeoverHook) OnConnect(cl *mochi.Client, _ packets.Packet) error {
	old, ok := h.srv.Clients.Get(cl.ID)
	if !ok || old == cl {
		return nil
	}
	served := h.ln.served(old.Net.Conn)
	if served == nil {
		return nil // mochi is done with it: the session is what it left
	}
	_ = h.srv.DisconnectClient(old, packets.ErrSessionTakenOver)
	timer := time.NewTimer(takeoverWait)
	defer timer.Stop()
	select {
	case <-served:
	case <-timer.C:
	}
	return nil
}
