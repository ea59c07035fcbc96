package grpc

import (
	"errors"
	"fmt"

	"github.com/workwire/sdk-go/internal/ocmfile"
	"github.com/workwire/sdk-go/options"
)

// LoadConfig reads a Config from a YAML or JSON file and validates it.
// Unknown keys are errors. Besides its own keys it reads those of OCM's gRPC
// config files (open-cluster-management.io/sdk-go), so a component moved
// to workwire keeps its file:
//
//	OCM key                          workwire key
//	url                              serverAddress
//	caFile, clientCertFile,          tls.caFile, tls.clientCertFile,
//	clientKeyFile                    tls.clientKeyFile
//	token, tokenFile                 the same
//	keepAliveConfig.enable: false    keepAliveTime: -1 (off)
//	keepAliveConfig.time, .timeout   keepAliveTime, keepAliveTimeout
//	serverHealthinessTimeout         heartbeatTimeout
//
// keepAliveConfig.permitWithoutStream is accepted and has no effect: the
// transport pings idle connections whenever keep-alive is on. A file that
// gives one setting in both spellings is an error naming both keys, as are
// embedded certificates (caData and the like).
func LoadConfig(path string) (Config, error) {
	return ocmfile.Load(path, parseConfig)
}

// file is what a config file holds: a Config in workwire's keys, and OCM's.
type file struct {
	Config
	ocmfile.Certs
	URL                      string           `json:"url,omitempty"`
	KeepAliveConfig          *ocmKeepAlive    `json:"keepAliveConfig,omitempty"`
	ServerHealthinessTimeout options.Duration `json:"serverHealthinessTimeout,omitempty"`
}

type ocmKeepAlive struct {
	Enable              bool             `json:"enable,omitempty"`
	Time                options.Duration `json:"time,omitempty"`
	Timeout             options.Duration `json:"timeout,omitempty"`
	PermitWithoutStream bool             `json:"permitWithoutStream,omitempty"`
}

// parseConfig decodes and validates a config file's bytes.
func parseConfig(data []byte) (Config, error) {
	var f file
	if err := options.Unmarshal(data, &f); err != nil {
		return Config{}, err
	}
	c := f.Config
	var errs []error
	ocmfile.Set(&errs, &c.ServerAddress, "serverAddress", f.URL, "url")
	ocmfile.Set(&errs, &c.HeartbeatTimeout, "heartbeatTimeout", f.ServerHealthinessTimeout, "serverHealthinessTimeout")
	if err := f.Certs.MergeInto(&c.TLS); err != nil {
		errs = append(errs, err)
	}
	if ka := f.KeepAliveConfig; ka != nil {
		switch {
		case c.KeepAliveTime != 0 || c.KeepAliveTimeout != 0:
			errs = append(errs, ocmfile.Both("keepAliveTime and keepAliveTimeout", "keepAliveConfig"))
		case !ka.Enable:
			c.KeepAliveTime = -1 // OCM's keep-alive is off unless enabled
		default:
			c.KeepAliveTime, c.KeepAliveTimeout = ka.Time, ka.Timeout
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("grpc config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}
