// Package pendingcmd is `workwire pending`: what a hub still waits for,
// read from the pending endpoint (pending.Handler) of a hub's process or
// of the broker's admin port.
package pendingcmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/workwire/sdk-go/cmd/workwire/internal/cli"
	"github.com/workwire/sdk-go/pending"
)

const long = `
Pending shows what a hub still waits for: the specs its source client, or
the broker for the works its Services hold, sent to agents that have not
acknowledged them with a status at their version — per cluster (how many,
the oldest, when its agent last spoke) and per work (the version sent, its
age, its re-sends), the oldest first.

ADDRESS is where the pending endpoint is served: host:port (the broker's
-admin-address, or a hub's own admin port that serves pending.Handler at
/debug/workwire/pending), or the endpoint's whole URL.`

// Command is `workwire pending`.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "pending",
		Usage: "[-cluster NAME] [-top N] [-o text|json] ADDRESS",
		Short: "show the specs a hub or broker waits for its agents to acknowledge",
		Long:  long,
		Flags: func(fs *flag.FlagSet) func(context.Context, *cli.Env, []string) error {
			var (
				out     cli.Output
				cluster = fs.String("cluster", "", "only this cluster's agent")
				top     = fs.Int("top", 20, fmt.Sprintf("list at most this many works and clusters, those that waited longest (1 to %d); the counts cover all", pending.MaxTop))
				timeout = fs.Duration("timeout", 10*time.Second, "how long to wait for the endpoint")
			)
			out.Register(fs)
			return func(ctx context.Context, env *cli.Env, args []string) error {
				if err := out.Check(); err != nil {
					return err
				}
				if len(args) != 1 {
					return cli.Usagef("want one ADDRESS, got %d arguments", len(args))
				}
				if _, err := pending.ParseQuery(*cluster, strconv.Itoa(*top)); err != nil {
					return cli.Usagef("-%v", err)
				}
				u, err := endpoint(args[0], *cluster, *top)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(ctx, *timeout)
				defer cancel()
				r, err := fetch(ctx, u)
				if err != nil {
					return err
				}
				if out.JSON() {
					return cli.PrintJSON(env.Stdout, r)
				}
				return print(env.Stdout, r, u)
			}
		},
	}
}

// endpoint is the URL of the report at address.
func endpoint(address, cluster string, top int) (string, error) {
	if !strings.Contains(address, "://") {
		address = "http://" + address + pending.DefaultPath
	}
	u, err := url.Parse(address)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", cli.Usagef("ADDRESS %q: want host:port or an http(s) URL", address)
	}
	q := u.Query()
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	q.Set("top", strconv.Itoa(top))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func fetch(ctx context.Context, u string) (pending.Report, error) {
	var r pending.Report
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return r, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return r, fmt.Errorf("read %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("%s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("%s: not a pending report: %w", u, err)
	}
	return r, nil
}

func print(w io.Writer, r pending.Report, u string) error {
	if r.Waiting == 0 {
		_, err := fmt.Fprintf(w, "nothing waits for an acknowledgement (%s at %s)\n", u, r.Time.Format(time.RFC3339))
		return err
	}
	fmt.Fprintf(w, "%d specs wait for an acknowledgement from %d agents, the oldest for %s (%s at %s)\n\n",
		r.Waiting, r.ClustersWaiting, age(r.OldestSeconds), u, r.Time.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tDATA TYPE\tWAITING\tHELD\tOLDEST\tLAST HEARD")
	for _, c := range r.Clusters {
		heard := "never"
		if !c.LastHeard.IsZero() {
			heard = age(r.Time.Sub(c.LastHeard).Seconds()) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", c.Name, shortType(c.DataType), c.Waiting, c.Held, age(c.OldestSeconds), heard)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := r.ClustersWaiting - len(r.Clusters); n > 0 {
		fmt.Fprintf(w, "... and %d more agents (-top, -cluster)\n", n)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(tw, "CLUSTER\tNAME\tRESOURCE ID\tVERSION\tAGE\tRESENDS\tSTATE")
	for _, s := range r.Specs {
		state := "sent"
		if s.Held {
			state = "held back"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\n", s.Cluster, orDash(s.Name), s.ResourceID, s.Version, age(s.AgeSeconds), s.Resends, state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := r.Waiting - len(r.Specs); n > 0 {
		fmt.Fprintf(w, "... and %d more specs (-top, -cluster)\n", n)
	}
	return nil
}

func age(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// shortType is a data type without its group: manifestbundles, for
// io.open-cluster-management.works.v1alpha1.manifestbundles.
func shortType(dt string) string {
	if i := strings.LastIndexByte(dt, '.'); i >= 0 {
		return dt[i+1:]
	}
	return dt
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
