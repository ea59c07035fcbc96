package mqtttest

import (
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// announceHook puts the maximum packet size mochi enforces into its
// CONNACKs, which mochi (v2.7) leaves out: MQTT v5 clients learn the limit
// there, and a client that does not know it can only learn it by being
// disconnected.
type announceHook struct {
	mochi.HookBase
	max uint32
}

func (h *announceHook) ID() string { return "mqtttest-announce-max-packet-size" }

func (h *announceHook) Provides(b byte) bool { return b == mochi.OnPacketEncode }

func (h *announceHook) OnPacketEncode(_ *mochi.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type == packets.Connack {
		pk.Properties.MaximumPacketSize = h.max
	}
	return pk
}
