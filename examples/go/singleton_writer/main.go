// Command singleton_writer is a process that must be the only one writing a
// store, with pg_tenure and pgx v4.
//
//	singleton_writer [--lease NAME] [--holder NAME] [--table NAME] [--pool N]
//	                 [--rows N] [--interval-ms N] [CONNSTRING]
//
// At start, on a control connection of its own (never one from the pool: the
// tenure is bound to this session, and we renew it there every ttl/3):
//
//	SELECT tenure.acquire_or_error(lease, holder, session_bound => true)
//
// fails with SQLSTATE TN001 if another writer holds the lease: we print the
// server's message (holder, epoch, since when) and exit with status 3. The
// writes go through a pgxpool.Pool; every transaction presents our epoch with
// set_config('tenure.tokens', 'lease=epoch', true). The first TN002 (another
// writer took over, or our epoch was claimed away) stops us with status 4,
// without retrying. Exit status: 0 done (released), 1 error, 3 held by
// another writer, 4 fenced or lost the lease.
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
	"github.com/jackc/pgx/v4/pgxpool"
)

func main() {
	host, _ := os.Hostname()
	lease := flag.String("lease", "orders-writer", "the writer lease")
	holder := flag.String("holder", fmt.Sprintf("%s:%d", host, os.Getpid()), "this writer's name")
	table := flag.String("table", "orders", "table to write: writer text, epoch bigint, seq bigint")
	poolSize := flag.Int("pool", 3, "connections that write")
	rows := flag.Int64("rows", 0, "rows to write, then release and exit; 0: until SIGTERM")
	interval := flag.Int("interval-ms", 100, "pause between rows")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("singleton_writer: ")
	say := func(format string, a ...interface{}) {
		fmt.Printf("%s %s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), *holder, fmt.Sprintf(format, a...))
	}
	// SIGTERM stops the loop between rows: a query is never cancelled through its context,
	// since pgx then sends a cancel request that crashes PgBouncer 1.18 (pgbouncer#801, #904)
	stopped, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx := context.Background()

	cfg, err := pgx.ParseConfig(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	cfg.PreferSimpleProtocol = true // no prepared statements: PgBouncer < 1.21 cannot route them
	control, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	var epoch int64
	var pgErr *pgconn.PgError
	err = control.QueryRow(ctx, "SELECT tenure.acquire_or_error($1, $2, session_bound => true)", *lease, *holder).Scan(&epoch)
	if errors.As(err, &pgErr) && pgErr.Code == "TN001" {
		say("refusing to start: %s (%s)", pgErr.Message, pgErr.Detail)
		os.Exit(3)
	} else if err != nil {
		say("cannot acquire the lease: %v", err)
		os.Exit(1)
	}
	var renewMs int64
	if err = control.QueryRow(ctx, "SELECT (extract(epoch FROM ttl) * 1000 / 3)::bigint FROM tenure.leases WHERE lease = $1",
		*lease).Scan(&renewMs); err != nil {
		log.Fatal(err)
	}
	nextRenew := time.Now().Add(time.Duration(renewMs) * time.Millisecond)

	poolCfg, err := pgxpool.ParseConfig(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	poolCfg.MaxConns = int32(*poolSize)
	poolCfg.ConnConfig.PreferSimpleProtocol = true
	pool, err := pgxpool.ConnectConfig(ctx, poolCfg)
	if err != nil {
		log.Fatal(err)
	}
	token := fmt.Sprintf("%s=%d", *lease, epoch)
	insert := "INSERT INTO " + pgx.Identifier{*table}.Sanitize() + " (writer, epoch, seq) VALUES ($1, $2, $3)"
	say("started epoch=%d pool=%d", epoch, *poolSize)

	for seq := int64(1); stopped.Err() == nil && (*rows == 0 || seq <= *rows); seq++ {
		if time.Now().After(nextRenew) { // keep the tenure alive on its own session
			var ok bool
			if err := control.QueryRow(ctx, "SELECT tenure.renew($1, $2)", *lease, *holder).Scan(&ok); err != nil || !ok {
				say("lost the lease epoch=%d: renew returned %v (%v)", epoch, ok, err)
				os.Exit(4)
			}
			nextRenew = time.Now().Add(time.Duration(renewMs) * time.Millisecond)
		}
		err := pool.BeginFunc(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_catalog.set_config('tenure.tokens', $1, true)", token); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, insert, *holder, epoch, seq)
			return err
		})
		if errors.As(err, &pgErr) && pgErr.Code == "TN002" {
			say("fenced: %s (%s)", pgErr.Message, pgErr.Detail) // a newer epoch exists: never retry
			os.Exit(4)
		} else if err != nil {
			log.Fatal(err)
		}
		say("wrote row seq=%d epoch=%d", seq, epoch)
		select {
		case <-stopped.Done():
		case <-time.After(time.Duration(*interval) * time.Millisecond):
		}
	}

	var released bool
	if err := control.QueryRow(ctx, "SELECT tenure.release($1, $2)", *lease, *holder).Scan(&released); err != nil {
		log.Fatal(err)
	}
	say("stopping; released epoch=%d", epoch)
	pool.Close()
}
