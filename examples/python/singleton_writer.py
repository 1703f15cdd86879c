#!/usr/bin/env python3
"""A process that must be the only one writing a store, with pg_tenure and psycopg 3.

    singleton_writer.py [--lease NAME] [--holder NAME] [--table NAME] [--pool N]
                        [--rows N] [--interval-ms N] [CONNINFO]

At start, on a control connection of its own (never one from the pool: the
tenure is bound to this session, and we renew it there every ttl/3):

    SELECT tenure.acquire_or_error(lease, holder, session_bound => true)

fails with SQLSTATE TN001 if another writer holds the lease: we print the
server's message (holder, epoch, since when) and exit with status 3.  The
writes go through a psycopg_pool ConnectionPool; every transaction presents
our epoch with set_config('tenure.tokens', 'lease=epoch', true).  The first
TN002 (another writer took over, or our epoch was claimed away) stops us with
status 4, without retrying.  Exit status: 0 done (released), 1 error,
3 held by another writer, 4 fenced or lost the lease.

Setup: tenure.create_lease('orders-writer', ttl => '10 s', holdoff => '0');
CREATE TABLE orders (writer text, epoch bigint, seq bigint);
tenure.fence_table('orders', 'orders-writer').
"""
import argparse, datetime, os, signal, socket, sys, time
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

p = argparse.ArgumentParser()
p.add_argument("--lease", default="orders-writer")
p.add_argument("--holder", default=f"{socket.gethostname()}:{os.getpid()}")
p.add_argument("--table", default="orders")
p.add_argument("--pool", type=int, default=3)
p.add_argument("--rows", type=int, default=0, help="0: until SIGTERM")
p.add_argument("--interval-ms", type=int, default=100)
p.add_argument("conninfo", nargs="?", default="")
args = p.parse_args()
signal.signal(signal.SIGTERM, signal.default_int_handler)

def say(msg):
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%S.%fZ} {args.holder} {msg}", flush=True)

def message(err):
    d = err.diag
    return f"{d.message_primary} ({d.message_detail})" if d.message_detail else d.message_primary

# prepare_threshold=None: PgBouncer before 1.21 cannot route prepared statements
control = psycopg.connect(args.conninfo, autocommit=True, prepare_threshold=None)
try:
    epoch = control.execute("SELECT tenure.acquire_or_error(%s, %s, session_bound => true)",
                            [args.lease, args.holder]).fetchone()[0]
except psycopg.Error as err:
    held = err.sqlstate == "TN001"
    say(f"{'refusing to start' if held else 'cannot acquire the lease'}: {message(err)}")
    sys.exit(3 if held else 1)
renew_every = control.execute("SELECT extract(epoch FROM ttl)::float8 / 3 FROM tenure.leases WHERE lease = %s",
                              [args.lease]).fetchone()[0]
next_renew = time.monotonic() + renew_every
token = f"{args.lease}={epoch}"
insert = sql.SQL("INSERT INTO {} (writer, epoch, seq) VALUES (%s, %s, %s)").format(sql.Identifier(args.table))
pool = ConnectionPool(args.conninfo, min_size=args.pool, max_size=args.pool,
                      kwargs={"prepare_threshold": None})
say(f"started epoch={epoch} pool={args.pool}")
seq = 0
try:
    while args.rows == 0 or seq < args.rows:
        seq += 1
        if time.monotonic() >= next_renew:  # keep the tenure alive on its own session
            try:
                renewed = control.execute("SELECT tenure.renew(%s, %s)", [args.lease, args.holder]).fetchone()[0]
            except psycopg.Error as err:  # the session, and the tenure with it, may be gone
                renewed = err
            if renewed is not True:
                say(f"lost the lease epoch={epoch}: renew returned {renewed}")
                sys.exit(4)
            next_renew = time.monotonic() + renew_every
        try:
            with pool.connection() as conn:  # one transaction, committed at the end of the block
                conn.execute("SELECT pg_catalog.set_config('tenure.tokens', %s, true)", [token])
                conn.execute(insert, [args.holder, epoch, seq])
        except psycopg.Error as err:
            if err.sqlstate != "TN002":
                raise
            say(f"fenced: {message(err)}")  # a newer epoch exists: never retry
            sys.exit(4)
        say(f"wrote row seq={seq} epoch={epoch}")
        time.sleep(args.interval_ms / 1000)
except KeyboardInterrupt:  # SIGTERM or SIGINT
    pass
control.execute("SELECT tenure.release(%s, %s)", [args.lease, args.holder])
say(f"stopping; released epoch={epoch}")
pool.close()
