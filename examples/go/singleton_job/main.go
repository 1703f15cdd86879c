// Command singleton_job runs a periodic job on exactly one of N replicas,
// with pg_tenure and pgx v4.
//
//	singleton_job [--lease NAME] [--holder NAME] [--ttl-ms N] [--job-ms N]
//	              [--job-table NAME] [--session-bound=false] [CONNSTRING]
//
// Every ttl/3 the campaign loop calls tenure.acquire(lease, holder, wait =>
// ttl/3, session_bound => ...) outside any transaction: a renewal for the
// leader, a campaign for the others, who sleep inside the call until the
// lease frees up. A new tenure may first wait out its predecessor's hold-off
// (tenure.await_active). The client rule decides isLeader: we lead until the
// send time of our last successful acquire plus the ttl, on Go's monotonic
// clock (time spent waiting inside acquire counts against it). The job
// presents our epoch with set_config('tenure.tokens', ..., true), so if its
// table is fenced by the lease a run that outlives the tenure cannot commit.
// Losing the lease demotes (never exits); SIGTERM releases it. Behind a
// transaction pooler pass --session-bound=false: the session would be the
// pooler's server connection, not this process.
//
// Hand-off: if the lease names a preferred holder (tenure.leases.preferred)
// other than us and it waits in acquire (tenure.waiters), the active leader
// calls tenure.handoff(lease, holder, preferred) and campaigns as a follower;
// the preferred holder's waiting acquire returns the new epoch. A handoff that
// fails with SQLSTATE 55000 (it stopped waiting) changes nothing: we stay
// leader. Output: "<time> <holder> became leader epoch=N", "lost leadership
// epoch=N (why)", "job run epoch=N", "handed over to <successor> epoch=N"
// (the successor's epoch).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

func main() {
	host, _ := os.Hostname()
	lease := flag.String("lease", envOr("TENURE_LEASE", "nightly-job"), "lease to campaign for")
	holder := flag.String("holder", envOr("TENURE_HOLDER", fmt.Sprintf("%s:%d", host, os.Getpid())), "this replica's name")
	ttlMs := flag.Int("ttl-ms", 0, "the lease's ttl (default: read it from tenure.leases)")
	jobMs := flag.Int("job-ms", 100, "how long the built-in job works")
	jobTable := flag.String("job-table", "job_runs", "table the job records its runs in")
	sessionBound := flag.Bool("session-bound", true, "end the tenure with our session")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("singleton_job: ")
	say := func(format string, a ...interface{}) {
		fmt.Printf("%s %s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), *holder, fmt.Sprintf(format, a...))
	}
	// SIGTERM ends the loop between calls: a query is never cancelled through its context,
	// since pgx then sends a cancel request that crashes PgBouncer 1.18 (pgbouncer#801, #904)
	stopped, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx := context.Background()

	cfg, err := pgx.ParseConfig(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	cfg.PreferSimpleProtocol = true // no prepared statements: PgBouncer < 1.21 cannot route them
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	ttl := time.Duration(*ttlMs) * time.Millisecond
	if ttl == 0 {
		var ms int64
		err = conn.QueryRow(ctx, "SELECT (extract(epoch FROM ttl) * 1000)::bigint FROM tenure.leases WHERE lease = $1", *lease).Scan(&ms)
		if err != nil {
			log.Fatalf("reading the ttl of lease %q: %v", *lease, err)
		}
		ttl = time.Duration(ms) * time.Millisecond
	}

	var epoch int64 // of the tenure we hold, 0 if none
	var active, leader bool
	var deadline time.Time // client rule: lead only before this
	isLeader := func() bool { return epoch != 0 && active && time.Now().Before(deadline) }
	demote := func(why string) {
		if leader {
			say("lost leadership epoch=%d (%s)", epoch, why)
		}
		epoch, active, leader = 0, false, false
	}
	// handOver: the active leader hands the lease to the preferred holder if
	// it is not us and waits in acquire; then we are a follower. Only an
	// active leader hands over: the successor is active at once.
	handOver := func() error {
		if !isLeader() {
			return nil
		}
		var successor string
		err := conn.QueryRow(ctx, "SELECT preferred FROM tenure.leases WHERE lease = $1 AND preferred <> $2"+
			" AND preferred IN (SELECT holder FROM tenure.waiters WHERE lease = $1)", *lease, *holder).Scan(&successor)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		} else if err != nil {
			return err
		}
		var e int64
		err = conn.QueryRow(ctx, "SELECT tenure.handoff($1, $2, $3)", *lease, *holder, successor).Scan(&e)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			say("handed over to %s epoch=%d", successor, e)
			epoch, active, leader = 0, false, false
		case errors.As(err, &pgErr) && pgErr.Code == "55000": // it stopped waiting: nothing changed
			say("handoff to %s failed, still leading: %s", successor, pgErr.Message)
		case errors.As(err, &pgErr) && pgErr.Code == "TN001": // our tenure expired before the handoff
			demote("our tenure ended")
		default:
			return err
		}
		return nil
	}
	runJob := func() error {
		return conn.BeginFunc(ctx, func(tx pgx.Tx) error {
			var started time.Time
			_, err := tx.Exec(ctx, "SELECT pg_catalog.set_config('tenure.tokens', $1, true)", fmt.Sprintf("%s=%d", *lease, epoch))
			if err == nil {
				err = tx.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&started)
			}
			if err == nil {
				_, err = tx.Exec(ctx, "SELECT pg_sleep($1)", float64(*jobMs)/1000) // the work
			}
			if err == nil {
				_, err = tx.Exec(ctx, "INSERT INTO "+pgx.Identifier{*jobTable}.Sanitize()+
					" (holder, epoch, started, finished) VALUES ($1, $2, $3, clock_timestamp())", *holder, epoch, started)
			}
			return err
		})
	}

	say("campaigning for lease %q (ttl %d ms)", *lease, ttl.Milliseconds())
	for stopped.Err() == nil {
		step := time.Now()
		err = nil
		if conn.IsClosed() {
			var c *pgx.Conn
			if c, err = pgx.ConnectConfig(ctx, cfg); err == nil {
				conn = c
				say("reconnected")
			}
		}
		wait := ttl / 3
		if epoch != 0 {
			wait = 0
		}
		var e *int64
		sent := time.Now()
		if err == nil {
			err = conn.QueryRow(ctx, "SELECT tenure.acquire($1, $2, wait => $3::interval, session_bound => $4)",
				*lease, *holder, fmt.Sprintf("%d ms", wait.Milliseconds()), *sessionBound).Scan(&e)
		}
		if err == nil && (e == nil || *e != epoch) {
			if e == nil {
				demote("another holder has the lease")
			} else if epoch != 0 {
				demote("our tenure ended")
			}
			if e != nil {
				epoch = *e
			}
		}
		if err == nil && epoch != 0 {
			deadline = sent.Add(ttl)
			if !active { // sleep out the hold-off, then renew at once
				err = conn.QueryRow(ctx, "SELECT tenure.await_active($1, $2, $3::interval)",
					*lease, *holder, fmt.Sprintf("%d ms", (ttl/3).Milliseconds())).Scan(&active)
				if err == nil {
					continue
				}
			} else if err = handOver(); err != nil {
				// handled below
			} else if isLeader() && time.Now().Add(time.Duration(*jobMs)*time.Millisecond).Before(deadline) {
				if !leader {
					leader = true
					say("became leader epoch=%d", epoch)
				}
				if err = runJob(); err == nil {
					say("job run epoch=%d", epoch)
				}
			} else if leader && !isLeader() {
				demote("no renewal within the ttl")
			}
		}
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
		case errors.As(err, &pgErr) && pgErr.Code == "TN002":
			say("job run fenced: %s", pgErr.Message)
			demote("fenced")
		case conn.IsClosed():
			demote("connection lost: " + err.Error())
		default:
			say("failed: %v", err)
		}
		select {
		case <-stopped.Done():
		case <-time.After(time.Until(step.Add(ttl / 3))):
		}
	}

	released := false // SIGTERM or SIGINT: release, so that a successor needs no hold-off
	if !conn.IsClosed() {
		_ = conn.QueryRow(ctx, "SELECT tenure.release($1, $2)", *lease, *holder).Scan(&released)
	}
	switch {
	case released && epoch != 0:
		say("stopping; released epoch=%d", epoch)
	case released: // a tenure whose acquire we did not see return
		say("stopping; released")
	default:
		say("stopping")
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
