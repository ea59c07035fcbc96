// Command mqtthub builds a hub holder over MQTT: the program whose
// dependencies TestAnMQTTHubLinksNoOtherTransport lists.
package main

import (
	"log"

	"github.com/workwire/sdk-go/options/mqtt"
	"github.com/workwire/sdk-go/work"
)

func main() {
	if _, err := work.NewClientHolderBuilder(&mqtt.Config{BrokerHost: "127.0.0.1:1883"}).WithSourceID("hub1").NewClientHolder(); err != nil {
		log.Fatal(err)
	}
}
