package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"

	"github.com/workwire/sdk-go/work/workstore"
)

// Watch tells handle of every change of the works, whoever wrote it (any
// replica over the database), in the order the changes committed, from
// the moment it listens until ctx ends; it returns then, with nil. It
// holds a connection of its own, made from the pool's config (PostgreSQL's
// LISTEN). When it loses it, it connects again and tells what changed
// while it was away — comparing every work's revision with the one it last
// saw: workstore.Created, workstore.SpecChanged (for any change, the status's included) or
// workstore.Deleted — so nothing is missed but the order of what changed meanwhile.
// handle runs on Watch's goroutine, one change at a time.
//
// ready, if not nil, is closed once Watch listens: changes committed after
// it are told.
func (s *Store) Watch(ctx context.Context, handle func(workstore.Change), ready chan<- struct{}) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("channel", s.channel)
	known := map[string]workstore.Change{}
	first := true
	backoff := 100 * time.Millisecond
	for {
		err := s.listen(ctx, known, first, handle, func() {
			first, backoff = false, 100*time.Millisecond
			if ready != nil {
				close(ready)
				ready = nil
			}
		})
		if ctx.Err() != nil {
			return nil
		}
		log.Error(err, "watching the works' changes; connecting again", "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listen connects, listens, catches up, and hands notifications to handle
// until the connection fails or ctx ends.
func (s *Store) listen(ctx context.Context, known map[string]workstore.Change, first bool, handle func(workstore.Change), listening func()) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = s.WatchName()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		return err
	}
	// Listening: what commits from now on is notified. What is stored now
	// is the baseline, or, after a lost connection, what to compare.
	now := map[string]workstore.Change{}
	rows, err := conn.Query(ctx, `SELECT uid::text, cluster, revision FROM workwire_works`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var c workstore.Change
		if err := rows.Scan(&c.UID, &c.Cluster, &c.Revision); err != nil {
			rows.Close()
			return err
		}
		now[c.UID] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if !first {
		for uid, c := range now {
			switch was, ok := known[uid]; {
			case !ok:
				c.Op = workstore.Created
				handle(c)
			case was.Revision != c.Revision:
				c.Op = workstore.SpecChanged
				handle(c)
			}
		}
		for uid, c := range known {
			if _, ok := now[uid]; !ok {
				c.Op = workstore.Deleted
				handle(c)
			}
		}
	}
	clear(known)
	for uid, c := range now {
		known[uid] = c
	}
	listening()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		c, err := parseChange(n.Payload)
		if err != nil {
			return err
		}
		if c.Op == workstore.Deleted {
			delete(known, c.UID)
		} else {
			known[c.UID] = c
		}
		handle(c)
	}
}

// WatchName is the application_name of Watch's connection, as
// pg_stat_activity shows it: "workwire watch <schema>.workwire_works".
func (s *Store) WatchName() string { return "workwire watch " + s.channel }

// parseChange parses "<op> <uid> <cluster> <revision>".
func parseChange(payload string) (workstore.Change, error) {
	f := strings.Fields(payload)
	if len(f) != 4 || len(f[0]) != 1 {
		return workstore.Change{}, fmt.Errorf("notification %q: want \"<op> <uid> <cluster> <revision>\"", payload)
	}
	rev, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return workstore.Change{}, fmt.Errorf("notification %q: %w", payload, err)
	}
	c := workstore.Change{Op: workstore.Op(f[0][0]), UID: f[1], Cluster: f[2], Revision: rev}
	switch c.Op {
	case workstore.Created, workstore.SpecChanged, workstore.StatusChanged, workstore.Deleted:
		return c, nil
	}
	return workstore.Change{}, errors.New("notification " + strconv.Quote(payload) + ": unknown op")
}
