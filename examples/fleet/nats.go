package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/workwire/sdk-go/examples/fleet/internal/proc"
)

// natsServers is the size of the NATS cluster a run over NATS starts; its
// stream is replicated on each.
const natsServers = 3

// startNATS starts a NATS cluster of natsServers servers with JetStream,
// each on loopback ports of its own, and sets the broker's address to all
// of their client URLs.
func (h *harness) startNATS(ctx context.Context) error {
	bin, err := natsServerBinary(ctx)
	if err != nil {
		return err
	}
	client, routes := make([]int, natsServers), make([]int, natsServers)
	for i := range natsServers {
		if client[i], err = freePort(); err != nil {
			return err
		}
		if routes[i], err = freePort(); err != nil {
			return err
		}
	}
	var urls []string
	for i := range natsServers {
		var others []string
		for j := range natsServers {
			if j != i {
				others = append(others, fmt.Sprintf("nats://127.0.0.1:%d", routes[j]))
			}
		}
		name := fmt.Sprintf("nats-%d", i)
		conf := filepath.Join(h.dir, name+".conf")
		if err := os.WriteFile(conf, []byte(strings.Join([]string{
			fmt.Sprintf("server_name: %s", name),
			fmt.Sprintf("listen: 127.0.0.1:%d", client[i]),
			"max_payload: 8MB",
			fmt.Sprintf("jetstream { store_dir: %q }", filepath.Join(h.dir, name)),
			fmt.Sprintf("cluster { name: fleet, listen: 127.0.0.1:%d, routes: [%s] }", routes[i], strings.Join(others, ", ")),
		}, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		p, err := proc.Start(h.dir, name, bin, "-c", conf)
		if err != nil {
			return err
		}
		h.brokers = append(h.brokers, p)
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", client[i]))
	}
	for i, u := range urls {
		if err := awaitListen(ctx, strings.TrimPrefix(u, "nats://"), h.brokers[i]); err != nil {
			return err
		}
	}
	h.c.broker, h.c.replicas = strings.Join(urls, ","), natsServers
	return nil
}

// awaitListen waits until addr accepts connections, or p ends.
func awaitListen(ctx context.Context, addr string, p *proc.Process) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		if err := p.Exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not listen on %s: %v", p.Name, addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// natsServerVersion is the nats-server a run over NATS builds, the one the
// NATS transport's tests embed.
const natsServerVersion = "v2.15.3"

// natsServerBinary is $WORKWIRE_NATS_SERVER, or nats-server
// natsServerVersion built once into the user's cache from the module proxy
// (Debian's, 2.9, clusters JetStream less well).
func natsServerBinary(ctx context.Context) (string, error) {
	if p := os.Getenv("WORKWIRE_NATS_SERVER"); p != "" {
		return p, nil
	}
	version := natsServerVersion
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "workwire", "nats-server-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	// Built in a module of its own, so that it needs no source tree.
	mod, err := os.MkdirTemp("", "nats-server-build")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(mod)
	gomod := "module build\n\ngo 1.26\n\nrequire github.com/nats-io/nats-server/v2 " + version + "\n"
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", err
	}
	for _, args := range [][]string{
		{"get", "github.com/nats-io/nats-server/v2@" + version},
		{"build", "-trimpath", "-o", bin + ".tmp", "github.com/nats-io/nats-server/v2"},
	} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = mod
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build nats-server %s: go %s: %v\n%s", version, strings.Join(args, " "), err, out)
		}
	}
	return bin, os.Rename(bin+".tmp", bin)
}
