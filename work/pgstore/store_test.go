package pgstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/workwire/sdk-go/internal/testsupport/pgtest"
	"github.com/workwire/sdk-go/work/pgstore"
	"github.com/workwire/sdk-go/work/workstore"
	"github.com/workwire/sdk-go/work/workstore/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) workstore.Store {
		s, err := pgstore.Open(context.Background(), pgtest.Pool(t))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Replicas that open one database at once migrate it once; a schema newer
// than the program's is refused.
func TestTheSchemaMigratesOnceAndRefusesANewerOne(t *testing.T) {
	cfg := pgtest.Config(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			_, err := pgstore.Open(context.Background(), pgtest.PoolOf(t, cfg))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("open: %v", err)
		}
	}
	pool := pgtest.PoolOf(t, cfg)
	var version int
	if err := pool.QueryRow(context.Background(), `SELECT version FROM workwire_schema`).Scan(&version); err != nil || version != pgstore.SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", version, err, pgstore.SchemaVersion)
	}
	if _, err := pool.Exec(context.Background(), `UPDATE workwire_schema SET version = 99`); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Open(context.Background(), pool); err == nil || !strings.Contains(err.Error(), "newer than this program's") {
		t.Errorf("open of a newer schema: %v", err)
	}
}

// Watch tells the changes another replica makes, and after losing its
// connection it tells what changed meanwhile.
func TestWatchCatchesUp(t *testing.T) {
	cfg := pgtest.Config(t)
	s, err := pgstore.Open(context.Background(), pgtest.PoolOf(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgstore.Open(context.Background(), pgtest.PoolOf(t, cfg)) // another replica
	if err != nil {
		t.Fatal(err)
	}
	got := storetest.Watch(t, s)
	ctx := context.Background()

	// The watch loses its connection; meanwhile a work is created and
	// another deleted: it tells both once it is back.
	kept, err := other.Create(ctx, storetest.NewWork("cluster1", "kept", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	gone, err := other.Create(ctx, storetest.NewWork("cluster1", "gone", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Eventually(t, "both created", func() bool { return len(got.Of(string(gone.UID))) == 1 })
	pool := pgtest.PoolOf(t, cfg)
	if n := pgtest.Terminate(t, pool, s.WatchName()); n != 1 {
		t.Fatalf("ended %d watch connections, want 1", n)
	}
	created, err := other.Create(ctx, storetest.NewWork("cluster2", "meanwhile", nil, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM workwire_works WHERE uid = $1`, gone.UID); err != nil {
		t.Fatal(err)
	}
	storetest.Eventually(t, "what changed meanwhile told", func() bool {
		return len(got.Of(string(created.UID))) == 1 && len(got.Of(string(gone.UID))) == 2
	})
	if ops := got.Of(string(gone.UID)); ops[1] != workstore.Deleted {
		t.Errorf("the work deleted meanwhile: told %v", ops)
	}
	if ops := got.Of(string(kept.UID)); len(ops) != 1 {
		t.Errorf("a work that did not change: told %v", ops)
	}
}

// BenchmarkUpdate measures a spec update of one work: its check and write
// in one transaction.
func BenchmarkUpdate(b *testing.B) {
	s, err := pgstore.Open(context.Background(), pgtest.Pool(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	w, err := s.Create(ctx, storetest.NewWork("cluster1", "w1", nil, "0"))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if w, err = s.Update(ctx, storetest.NewWorkAt(w, strconv.Itoa(i+1))); err != nil {
			b.Fatal(err)
		}
	}
}
