package kafka

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
)

// scramClient is the client side of SCRAM (RFC 5802, RFC 7677) without
// channel binding, as Kafka brokers speak it. sarama drives it: Begin, then
// Step with each server challenge until Done.
type scramClient struct {
	newHash func() hash.Hash
	nonce   func() (string, error) // the client nonce; random unless a test sets it
	// password, when set, gives the password at each Begin (read from
	// SASLConfig.PasswordFile) instead of the one sarama passes.
	password func() (string, error)

	user, pass, authzID string
	step                int
	clientNonce         string
	gs2Header           string
	clientFirstBare     string
	serverSignature     []byte
	done                bool
}

// newSCRAMClient returns sarama's SCRAMClientGeneratorFunc for mechanism;
// sarama makes a client for every authentication. password, when not nil,
// is asked for the password each time.
func newSCRAMClient(mechanism string, password func() (string, error)) func() sarama.SCRAMClient {
	h := sha256.New
	if mechanism == SASLScramSHA512 {
		h = sha512.New
	}
	return func() sarama.SCRAMClient { return &scramClient{newHash: h, nonce: randomNonce, password: password} }
}

func randomNonce() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b[:]), nil
}

// maxIterations bounds the PBKDF2 work a server can ask of us.
const maxIterations = 10_000_000

// Begin implements sarama.SCRAMClient.
func (c *scramClient) Begin(user, password, authzID string) error {
	if c.password != nil {
		p, err := c.password()
		if err != nil {
			return fmt.Errorf("sasl: %w", err)
		}
		password = p
	}
	c.user, c.pass, c.authzID = user, password, authzID
	c.step, c.done = 0, false
	return nil
}

// Done implements sarama.SCRAMClient.
func (c *scramClient) Done() bool { return c.done }

// Step implements sarama.SCRAMClient.
func (c *scramClient) Step(challenge string) (string, error) {
	c.step++
	switch c.step {
	case 1:
		return c.clientFirst()
	case 2:
		return c.clientFinal(challenge)
	case 3:
		return "", c.verifyServerFinal(challenge)
	}
	return "", errors.New("scram: exchange already finished")
}

func (c *scramClient) clientFirst() (string, error) {
	nonce, err := c.nonce()
	if err != nil {
		return "", fmt.Errorf("scram: client nonce: %w", err)
	}
	c.clientNonce = nonce
	c.gs2Header = "n,,"
	if c.authzID != "" {
		c.gs2Header = "n,a=" + saslName(c.authzID) + ","
	}
	c.clientFirstBare = "n=" + saslName(c.user) + ",r=" + nonce
	return c.gs2Header + c.clientFirstBare, nil
}

func (c *scramClient) clientFinal(serverFirst string) (string, error) {
	var nonce, salt string
	iterations := -1
	for _, attr := range strings.Split(serverFirst, ",") {
		k, v, ok := strings.Cut(attr, "=")
		if !ok || len(k) != 1 {
			continue
		}
		switch k {
		case "r":
			nonce = v
		case "s":
			salt = v
		case "i":
			n, err := strconv.Atoi(v)
			if err != nil {
				return "", fmt.Errorf("scram: server-first message: iteration count %q", v)
			}
			iterations = n
		case "e":
			return "", fmt.Errorf("scram: server error: %s", v)
		case "m":
			return "", errors.New("scram: server requires an extension this client does not support")
		}
	}
	switch {
	case !strings.HasPrefix(nonce, c.clientNonce) || len(nonce) == len(c.clientNonce):
		return "", errors.New("scram: server nonce does not extend the client nonce")
	case iterations < 1 || iterations > maxIterations:
		return "", fmt.Errorf("scram: server-first message: iteration count %d out of range", iterations)
	}
	saltBytes, err := base64.StdEncoding.DecodeString(salt)
	if err != nil || len(saltBytes) == 0 {
		return "", errors.New("scram: server-first message: bad salt")
	}
	salted, err := pbkdf2.Key(c.newHash, c.pass, saltBytes, iterations, c.newHash().Size())
	if err != nil {
		return "", fmt.Errorf("scram: %w", err)
	}
	clientKey := c.hmac(salted, "Client Key")
	h := c.newHash()
	h.Write(clientKey)
	storedKey := h.Sum(nil)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(c.gs2Header)) + ",r=" + nonce
	authMessage := c.clientFirstBare + "," + serverFirst + "," + withoutProof
	signature := c.hmac(storedKey, authMessage)
	proof := make([]byte, len(clientKey))
	for i := range clientKey {
		proof[i] = clientKey[i] ^ signature[i]
	}
	c.serverSignature = c.hmac(c.hmac(salted, "Server Key"), authMessage)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
}

func (c *scramClient) verifyServerFinal(serverFinal string) error {
	k, _, _ := strings.Cut(serverFinal, ",")
	switch {
	case strings.HasPrefix(k, "e="):
		return fmt.Errorf("scram: server error: %s", strings.TrimPrefix(k, "e="))
	case !strings.HasPrefix(k, "v="):
		return errors.New("scram: server-final message has no verifier")
	}
	got, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(k, "v="))
	if err != nil || subtle.ConstantTimeCompare(got, c.serverSignature) != 1 {
		return errors.New("scram: the server's signature does not match: it does not know the password")
	}
	c.done = true
	return nil
}

func (c *scramClient) hmac(key []byte, msg string) []byte {
	m := hmac.New(c.newHash, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// saslName escapes ',' and '=' in a user name (RFC 5802 section 5.1).
func saslName(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}
