package mqtt

import (
	"errors"
	"fmt"
	"strings"

	"github.com/workwire/sdk-go/internal/ocmfile"
	"github.com/workwire/sdk-go/options"
)

// LoadConfig reads a Config from a YAML or JSON file and validates it.
// Unknown keys are errors. Besides its own keys it reads those of OCM's
// MQTT config files (open-cluster-management.io/sdk-go), so a component
// moved to workwire keeps its file:
//
//	OCM key                         workwire key
//	brokerHost, username, password  the same
//	keepAlive (seconds), dialTimeout  the same
//	caFile, clientCertFile,         tls.caFile, tls.clientCertFile,
//	clientKeyFile                   tls.clientKeyFile
//	pubQoS, subQoS                  qos (one for both: they must agree)
//	topics.sourceEvents,            topics.spec, topics.status,
//	topics.agentEvents,             topics.statusResync,
//	topics.sourceBroadcast,         topics.specResync; a $share/<group>/
//	topics.agentBroadcast           prefix becomes sharedGroup
//
// OCM's topics are subscription filters, such as
// sources/hub1/clusters/+/sourceevents; the source and cluster levels
// become the {source} and {cluster} of a layout whatever they hold (a
// workwire source subscribes to its own statuses and an agent to its own
// cluster's specs by themselves), and missing broadcast topics are the ocm
// layout's. A file that gives one setting in both spellings is an error
// naming both keys, as are embedded certificates (caData and the like).
func LoadConfig(path string) (Config, error) {
	return ocmfile.Load(path, parseConfig)
}

// file is what a config file holds: a Config in workwire's keys, and OCM's.
type file struct {
	Config
	ocmfile.Certs
	PubQoS *int `json:"pubQoS,omitempty"`
	SubQoS *int `json:"subQoS,omitempty"`
	// Topics takes workwire's templates or OCM's filters; it hides
	// Config.Topics from the decoder.
	Topics *fileTopics `json:"topics,omitempty"`
}

type fileTopics struct {
	options.Layout
	SourceEvents    string `json:"sourceEvents,omitempty"`
	AgentEvents     string `json:"agentEvents,omitempty"`
	SourceBroadcast string `json:"sourceBroadcast,omitempty"`
	AgentBroadcast  string `json:"agentBroadcast,omitempty"`
}

// parseConfig decodes and validates a config file's bytes.
func parseConfig(data []byte) (Config, error) {
	var f file
	if err := options.Unmarshal(data, &f); err != nil {
		return Config{}, err
	}
	c := f.Config
	errs := []error{f.Certs.MergeInto(&c.TLS)}
	switch {
	case f.PubQoS == nil && f.SubQoS == nil:
	case c.QoS != nil:
		errs = append(errs, ocmfile.Both("qos", "pubQoS and subQoS"))
	case f.PubQoS != nil && f.SubQoS != nil && *f.PubQoS != *f.SubQoS:
		errs = append(errs, fmt.Errorf("pubQoS %d and subQoS %d differ: workwire uses one qos for publishing and subscribing", *f.PubQoS, *f.SubQoS))
	case f.PubQoS != nil:
		c.QoS = f.PubQoS
	default:
		c.QoS = f.SubQoS
	}
	if f.Topics != nil {
		if err := f.Topics.mergeInto(&c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("mqtt config: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// mergeInto sets c's topics from t: workwire's templates as they are, or a
// layout made of OCM's filters.
func (t *fileTopics) mergeInto(c *Config) error {
	ocm := t.SourceEvents != "" || t.AgentEvents != "" || t.SourceBroadcast != "" || t.AgentBroadcast != ""
	if !ocm {
		l := t.Layout
		c.Topics = &l
		return nil
	}
	if t.Layout != (options.Layout{}) {
		return errors.New("topics mixes workwire's keys (spec, status, specResync, statusResync) with OCM's (sourceEvents, agentEvents, sourceBroadcast, agentBroadcast): keep one set")
	}
	if c.Layout != "" {
		return ocmfile.Both("layout", "topics")
	}
	l, group, err := t.ocmLayout()
	if err != nil {
		return err
	}
	c.Topics = &l
	if group != "" {
		if c.SharedGroup != "" && c.SharedGroup != group {
			return fmt.Errorf("sharedGroup %q and the $share/%s/ of OCM's topics disagree: keep one", c.SharedGroup, group)
		}
		c.SharedGroup = group
	}
	return nil
}

// ocmLayout turns OCM's topic filters into a layout and the shared
// subscription group they name, if any.
func (t *fileTopics) ocmLayout() (options.Layout, string, error) {
	var errs []error
	var groups []string
	level := func(key, filter string, levels int, suffix string, placeholders ...string) string {
		if filter == "" {
			errs = append(errs, fmt.Errorf("topics.%s is required", key))
			return ""
		}
		rest := filter
		if strings.HasPrefix(rest, "$share/") {
			parts := strings.SplitN(rest, "/", 3)
			if len(parts) < 3 || parts[1] == "" {
				errs = append(errs, fmt.Errorf("topics.%s %q: want $share/<group>/<topic>", key, filter))
				return ""
			}
			groups = append(groups, parts[1])
			rest = parts[2]
		}
		parts := strings.Split(rest, "/")
		if len(parts) != levels || parts[levels-1] != suffix {
			errs = append(errs, fmt.Errorf("topics.%s %q: want %d levels ending in %s", key, filter, levels, suffix))
			return ""
		}
		// Every other level is a literal, then an ID (a placeholder now).
		for i := 1; i < levels; i += 2 {
			parts[i] = placeholders[i/2]
		}
		return strings.Join(parts, "/")
	}
	l := options.Layout{
		Spec:   level("sourceEvents", t.SourceEvents, 5, "sourceevents", options.SourcePlaceholder, options.ClusterPlaceholder),
		Status: level("agentEvents", t.AgentEvents, 5, "agentevents", options.SourcePlaceholder, options.ClusterPlaceholder),
	}
	l.StatusResync, l.SpecResync = options.OCMLayout.StatusResync, options.OCMLayout.SpecResync
	if t.SourceBroadcast != "" {
		l.StatusResync = level("sourceBroadcast", t.SourceBroadcast, 3, "sourcebroadcast", options.SourcePlaceholder)
	}
	if t.AgentBroadcast != "" {
		l.SpecResync = level("agentBroadcast", t.AgentBroadcast, 3, "agentbroadcast", options.ClusterPlaceholder)
	}
	group := ""
	for _, g := range groups {
		if group != "" && g != group {
			errs = append(errs, fmt.Errorf("OCM's topics name two $share groups, %q and %q", group, g))
		}
		group = g
	}
	return l, group, errors.Join(errs...)
}
