package kafka

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// scramClient is the client side of SCRAM (RFC 5802, RFC 7677) as Kafka
// brokers speak it, on github.com/xdg-go/scram. sarama drives it: Begin,
// then Step with each server challenge until Done.
type scramClient struct {
	hash scram.HashGeneratorFcn
	// nonce, when set, makes the client nonces (tests); random otherwise.
	nonce scram.NonceGeneratorFcn
	// password, when set, gives the password at each Begin (read from
	// SASLConfig.PasswordFile) instead of the one sarama passes.
	password func() (string, error)

	conv *scram.ClientConversation
	step int
}

// newSCRAMClient returns sarama's SCRAMClientGeneratorFunc for mechanism;
// sarama makes a client for every authentication. password, when not nil,
// is asked for the password each time.
func newSCRAMClient(mechanism string, password func() (string, error)) func() sarama.SCRAMClient {
	h := scram.SHA256
	if mechanism == SASLScramSHA512 {
		h = scram.SHA512
	}
	return func() sarama.SCRAMClient { return &scramClient{hash: h, password: password} }
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
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return fmt.Errorf("scram: %w", err)
	}
	if c.nonce != nil {
		client = client.WithNonceGenerator(c.nonce)
	}
	c.conv, c.step = client.NewConversation(), 0
	return nil
}

// Done implements sarama.SCRAMClient: true once the server proved it knows
// the password.
func (c *scramClient) Done() bool { return c.conv != nil && c.conv.Valid() }

// Step implements sarama.SCRAMClient.
func (c *scramClient) Step(challenge string) (string, error) {
	if c.conv == nil {
		return "", fmt.Errorf("scram: Step before Begin")
	}
	c.step++
	if c.step == 2 {
		if err := checkServerFirst(challenge); err != nil {
			return "", err
		}
	}
	resp, err := c.conv.Step(challenge)
	if err != nil {
		return "", fmt.Errorf("scram: %w", err)
	}
	return resp, nil
}

// checkServerFirst refuses a server-first message that reports an error or
// asks for more PBKDF2 iterations than maxIterations, before any is done.
func checkServerFirst(msg string) error {
	if e, ok := strings.CutPrefix(msg, "e="); ok {
		return fmt.Errorf("scram: server error: %s", e)
	}
	for _, attr := range strings.Split(msg, ",") {
		if v, ok := strings.CutPrefix(attr, "i="); ok {
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > maxIterations {
				return fmt.Errorf("scram: server-first message: iteration count %q out of range (1 to %d)", v, maxIterations)
			}
			return nil
		}
	}
	return fmt.Errorf("scram: server-first message: no iteration count")
}
