package kafkatest_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/workwire/sdk-go/options/kafka"
	"github.com/workwire/sdk-go/options/kafka/kafkatest"
)

func TestBrokerLifecycle(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t, kafkatest.WithBrokers(2), kafkatest.WithPartitions(3), kafkatest.WithTopics("extra.topic"))
	addrs := b.Addrs()
	if len(addrs) != 2 || b.Addr() != addrs[0] {
		t.Fatalf("addresses %v, first %s", addrs, b.Addr())
	}
	for _, a := range addrs {
		if host, _, _ := net.SplitHostPort(a); host != "127.0.0.1" {
			t.Errorf("listening on %s, want 127.0.0.1", a)
		}
	}
	checkTopics := func() {
		t.Helper()
		for _, topic := range append(kafka.DefaultTopics().Names(), "extra.topic") {
			if n := len(b.Cluster().PartitionInfos(topic)); n != 3 {
				t.Errorf("topic %s has %d partitions, want 3", topic, n)
			}
		}
	}
	checkTopics()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Publish(ctx, "extra.topic", "k", []byte("v"), sarama.RecordHeader{Key: []byte("h"), Value: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	p := kafka.PartitionFor("k", 3)
	if hw := b.Cluster().PartitionInfo("extra.topic", p).HighWatermark; hw != 1 {
		t.Errorf("partition %d of extra.topic holds %d records, want 1", p, hw)
	}

	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := b.Addrs(); !slices.Equal(got, addrs) {
		t.Errorf("restarted on %v, want %v", got, addrs)
	}
	checkTopics()
	if hw := b.Cluster().PartitionInfo("extra.topic", p).HighWatermark; hw != 0 {
		t.Errorf("a record survived the restart")
	}
	if err := b.Publish(ctx, "created.on.first.use", "k", []byte("v")); err != nil {
		t.Errorf("publish to a new topic: %v", err)
	}

	b.Stop()
	if b.Cluster() != nil {
		t.Error("a stopped broker has a cluster")
	}
	if err := b.Publish(ctx, "extra.topic", "k", []byte("v")); err == nil {
		t.Error("published to a stopped broker")
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
	if err := b.Close(); err != nil {
		t.Error("second Close:", err)
	}
}

func TestDropConnections(t *testing.T) {
	t.Parallel()
	b := kafkatest.NewBroker(t)
	sc := sarama.NewConfig()
	client, err := sarama.NewClient(b.Addrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.RefreshMetadata(); err != nil {
		t.Fatal(err)
	}
	if n := b.DropConnections(); n == 0 {
		t.Fatal("no connection dropped")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := client.RefreshMetadata(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("client did not reconnect: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	t.Parallel()
	if _, err := kafkatest.Start(kafkatest.WithPartitions(0)); err == nil {
		t.Error("a cluster with no partitions started")
	}
}
