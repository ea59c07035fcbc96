package kubeauth

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/workwire/sdk-go/options/grpc/server"
)

// reviewCounter is an API server that knows the token "good", counts the
// reviews it answers, and fails them while down is set.
type reviewCounter struct {
	*fake.Clientset
	reviews atomic.Int32
	down    atomic.Bool
}

func newReviewCounter() *reviewCounter {
	c := &reviewCounter{Clientset: fake.NewClientset()}
	c.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		c.reviews.Add(1)
		if c.down.Load() {
			return true, nil, errors.New("apiserver down")
		}
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "good" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "u"}}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	return c
}

// A rejected token is rejected again from memory until the failure TTL
// passes; accepted tokens and failures to reach the API server are never
// remembered.
func TestTokenReviewRemembersRejections(t *testing.T) {
	c := newReviewCounter()
	a := NewTokenReview(c)
	clock := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return clock }
	ctx := context.Background()
	auth := func(token string) error {
		_, err := a.Authenticate(ctx, server.Credentials{Token: token})
		return err
	}
	reviews := func() int { return int(c.reviews.Load()) }

	for range 5 {
		if err := auth("bad"); err == nil || err.Error() != "invalid bearer token" {
			t.Fatalf("a bad token: %v, want the API server's reason", err)
		}
	}
	if n := reviews(); n != 1 {
		t.Fatalf("5 calls with one bad token made %d reviews, want 1", n)
	}
	if err := auth("other-bad"); err == nil || reviews() != 2 {
		t.Errorf("another bad token: %v after %d reviews, want a review of its own", err, reviews())
	}
	clock = clock.Add(DefaultFailureTTL - time.Millisecond)
	_ = auth("bad")
	if reviews() != 2 {
		t.Errorf("within the TTL the bad token was reviewed again")
	}
	clock = clock.Add(time.Millisecond)
	_ = auth("bad")
	if reviews() != 3 {
		t.Errorf("after the TTL the bad token was not reviewed again (%d reviews)", reviews())
	}

	for range 2 {
		if err := auth("good"); err != nil {
			t.Fatal(err)
		}
	}
	if n := reviews(); n != 5 {
		t.Errorf("two calls with a good token made %d reviews in all, want 5: only rejections are remembered", n)
	}

	c.down.Store(true)
	for range 2 {
		if err := auth("new-token"); status.Code(err) != codes.Unavailable {
			t.Fatalf("API server down: %v, want Unavailable", err)
		}
	}
	c.down.Store(false)
	if err := auth("good"); err != nil || reviews() != 8 {
		t.Errorf("after the API server is back: %v, %d reviews; a failure to reach it must not be remembered", err, reviews())
	}
}

func TestTokenReviewFailureTTLOff(t *testing.T) {
	c := newReviewCounter()
	a := NewTokenReview(c, WithFailureTTL(0))
	for range 3 {
		if _, err := a.Authenticate(context.Background(), server.Credentials{Token: "bad"}); err == nil {
			t.Fatal("a bad token was accepted")
		}
	}
	if n := c.reviews.Load(); n != 3 {
		t.Errorf("%d reviews for 3 calls with the failure cache off, want 3", n)
	}
}

// The remembered rejections are bounded.
func TestTokenReviewFailuresAreBounded(t *testing.T) {
	a := NewTokenReview(fake.NewClientset())
	for i := range maxFailures + 10 {
		a.reject([32]byte{byte(i), byte(i >> 8), byte(i >> 16)}, errors.New("rejected"))
	}
	a.mu.Lock()
	n := len(a.failures)
	a.mu.Unlock()
	if n > maxFailures {
		t.Errorf("%d rejections remembered, want at most %d", n, maxFailures)
	}
}
