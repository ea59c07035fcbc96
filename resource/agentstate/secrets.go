package agentstate

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SecretClient is what Secrets needs of a namespace's Secrets: client-go's
// clientset.CoreV1().Secrets(namespace) is one.
type SecretClient interface {
	Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error)
	Update(ctx context.Context, secret *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error)
}

// Labels, annotations and the type of the Secrets a Secrets store writes.
const (
	// LabelStore names the Secrets store an entry belongs to (its
	// prefix): kubectl get secrets -l workwire.io/agent-state=PREFIX
	// lists them.
	LabelStore = "workwire.io/agent-state"
	// AnnotationName is the entry's name: the object's.
	AnnotationName = "workwire.io/agent-state-name"
	// SecretType is the type of the Secrets.
	SecretType corev1.SecretType = "workwire.io/agent-state"
	// secretKey holds the entry's data, gzipped.
	secretKey = "entry.gz"
)

// maxSecretData is the most a Secret's data may hold: the kube-apiserver
// refuses more (1 MiB).
const maxSecretData = 1 << 20

// Secrets is a Store of Secrets on the managed cluster, one per object,
// in a namespace of the agent's: the state lives as long as the cluster,
// whatever happens to the agent's pod. Each Secret is named
// PREFIX.NAME (PREFIX--HASH where that is no valid name), labelled
// LabelStore=PREFIX and annotated with the object's name, and holds the
// entry gzipped under one key: an entry may take up to a Secret's 1 MiB
// compressed, and a larger one fails to Put. Secrets are used rather
// than ConfigMaps because what sources send may hold credentials. The
// agent needs get, list, create, update and delete on Secrets in the
// namespace. It is goroutine-safe.
type Secrets struct {
	client SecretClient
	prefix string

	mu    sync.Mutex
	known map[string]bool // Secrets known to exist, by Secret name: Put updates them
}

var _ Store = (*Secrets)(nil)

// NewSecrets returns the Store of the Secrets labelled prefix that client
// reaches. prefix must be a DNS-1123 label (such as "workwire-works"), and
// different for each holder that keeps its state in one namespace.
func NewSecrets(client SecretClient, prefix string) (*Secrets, error) {
	var errs []error
	if client == nil {
		errs = append(errs, errors.New("the Secret client is nil"))
	}
	for _, msg := range validation.IsDNS1123Label(prefix) {
		errs = append(errs, fmt.Errorf("prefix %q: %s", prefix, msg))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("agent state in Secrets: %w", errors.Join(errs...))
	}
	return &Secrets{client: client, prefix: prefix, known: make(map[string]bool)}, nil
}

// secretName is the name of the Secret of the entry name: PREFIX.NAME, or,
// where that is no valid Secret name, PREFIX--HASH. The character after
// the prefix tells the forms apart, so no name takes another's Secret.
func (s *Secrets) secretName(name string) string {
	direct := s.prefix + "." + name
	if len(validation.IsDNS1123Subdomain(direct)) == 0 {
		return direct
	}
	sum := sha256.Sum256([]byte(name))
	return s.prefix + "--" + hex.EncodeToString(sum[:20])
}

// Load implements Store.
func (s *Secrets) Load(ctx context.Context) (map[string][]byte, error) {
	out := make(map[string][]byte)
	opts := metav1.ListOptions{LabelSelector: LabelStore + "=" + s.prefix, Limit: 500}
	for {
		list, err := s.client.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("agent state in Secrets: list: %w", err)
		}
		for i := range list.Items {
			sec := &list.Items[i]
			name, ok := sec.Annotations[AnnotationName]
			if !ok {
				return nil, fmt.Errorf("agent state in Secrets: Secret %s has no annotation %s", sec.Name, AnnotationName)
			}
			data, err := gunzip(sec.Data[secretKey])
			if err != nil {
				return nil, fmt.Errorf("agent state in Secrets: Secret %s: %w", sec.Name, err)
			}
			out[name] = data
			s.setKnown(sec.Name, true)
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// Put implements Store.
func (s *Secrets) Put(ctx context.Context, name string, data []byte) error {
	packed, err := gzipped(data)
	if err != nil {
		return fmt.Errorf("agent state in Secrets: put %s: %w", name, err)
	}
	if len(packed) > maxSecretData {
		return fmt.Errorf("agent state in Secrets: put %s: %d bytes gzipped, more than a Secret holds (%d)", name, len(packed), maxSecretData)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.secretName(name),
			Labels:      map[string]string{LabelStore: s.prefix},
			Annotations: map[string]string{AnnotationName: name},
		},
		Type: SecretType,
		Data: map[string][]byte{secretKey: packed},
	}
	// An Update without a resourceVersion replaces the Secret whatever its
	// version: the holder writes one name at a time.
	for range 2 {
		if s.isKnown(sec.Name) {
			_, err = s.client.Update(ctx, sec, metav1.UpdateOptions{})
			if !apierrors.IsNotFound(err) {
				break
			}
			s.setKnown(sec.Name, false)
		}
		_, err = s.client.Create(ctx, sec, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			break
		}
		s.setKnown(sec.Name, true)
	}
	if err != nil {
		return fmt.Errorf("agent state in Secrets: put %s: %w", name, err)
	}
	s.setKnown(sec.Name, true)
	return nil
}

// Delete implements Store.
func (s *Secrets) Delete(ctx context.Context, name string) error {
	sn := s.secretName(name)
	err := s.client.Delete(ctx, sn, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("agent state in Secrets: delete %s: %w", name, err)
	}
	s.setKnown(sn, false)
	return nil
}

func (s *Secrets) isKnown(secret string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.known[secret]
}

func (s *Secrets) setKnown(secret string, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if known {
		s.known[secret] = true
	} else {
		delete(s.known, secret)
	}
}

func gzipped(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func gunzip(data []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("entry: %w", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("entry: %w", err)
	}
	return out, nil
}
