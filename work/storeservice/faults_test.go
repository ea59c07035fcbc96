package storeservice_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/workwire/sdk-go/internal/testsupport/pgtest"
	"github.com/workwire/sdk-go/work"
	"github.com/workwire/sdk-go/work/pgstore"
	"github.com/workwire/sdk-go/work/workstore"
)

// The database fails under a running service: every connection of the
// service killed mid-write (mid-transaction), and — with pgtest.RestartEnv —
// PostgreSQL restarted. Writers retry what failed; nothing is lost or
// duplicated, and the service recovers by itself: every work reaches its
// agent and every status is stored.
func TestTheServiceRecoversFromDatabaseFaults(t *testing.T) {
	const clusters, works = 3, 1200
	cfg := pgtest.Config(t)
	store, err := pgstore.Open(context.Background(), pgtest.PoolOf(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, store)
	agents := make([]*work.ClientHolder, clusters)
	for i := range agents {
		agents[i] = startAgent(t, r.srv.Config(), fmt.Sprintf("cluster%d", i))
	}
	restart := os.Getenv(pgtest.RestartEnv)
	faults := []string{"connections killed"}
	if restart != "" {
		faults = append(faults, "PostgreSQL restarted")
	}

	// Four writers, each retrying what failed; the faults strike while
	// their writes (and the agents' statuses) are in flight.
	ctx := context.Background()
	var retries atomic.Int64
	var written atomic.Int64
	var wg sync.WaitGroup
	for wr := range 4 {
		wg.Go(func() {
			for i := wr; i < works; i += 4 {
				w := newWork(fmt.Sprintf("cluster%d", i%clusters), fmt.Sprintf("w%d", i), "1")
				for attempt := 0; ; attempt++ {
					_, err := store.Create(ctx, w)
					if err == nil || attempt > 0 && apierrors.IsAlreadyExists(err) {
						break // a retry that finds it: the failed attempt committed
					}
					if attempt == 600 {
						t.Errorf("create %s: %v", w.Name, err)
						return
					}
					retries.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
				written.Add(1)
			}
		})
	}
	for k, fault := range faults {
		at := int64((k + 1) * works / (len(faults) + 1))
		eventually(t, fmt.Sprintf("%d works written", at), 2*time.Minute, func() bool { return written.Load() >= at })
		switch fault {
		case "connections killed":
			t.Logf("%s after %d works: %d", fault, written.Load(), pgtest.Drop(t, cfg))
		default:
			t.Logf("%s after %d works: %s", fault, written.Load(), restart)
			fields := strings.Fields(restart)
			if out, err := exec.Command(fields[0], fields[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", restart, err, out)
			}
			t.Logf("PostgreSQL back after %d works", written.Load())
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d works written, %d writes retried", works, retries.Load())

	stored := func() (all, applied int) {
		l, err := store.List(ctx, workstore.ListOptions{})
		if err != nil {
			return -1, -1 // the database may still be coming back
		}
		for i := range l.Items {
			if appliedAt(&l.Items[i], 1) {
				applied++
			}
		}
		return len(l.Items), applied
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, applied := stored(); applied != works; _, applied = stored() {
		if time.Now().After(deadline) {
			for i, a := range agents {
				l, _ := a.ManifestWorkInformer().Lister().ManifestWorks(fmt.Sprintf("cluster%d", i)).List(labels.Everything())
				t.Logf("cluster%d's agent holds %d works", i, len(l))
			}
			t.Fatalf("%d of %d statuses stored", applied, works)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if all, _ := stored(); all != works {
		t.Errorf("%d works in the database, want %d", all, works)
	}
	for i, a := range agents {
		l, err := a.ManifestWorkInformer().Lister().ManifestWorks(fmt.Sprintf("cluster%d", i)).List(labels.Everything())
		if err != nil || len(l) != works/clusters {
			t.Errorf("cluster%d's agent holds %d works, want %d (%v)", i, len(l), works/clusters, err)
		}
	}
}
