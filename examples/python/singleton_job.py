#!/usr/bin/env python3
"""Run a periodic job on exactly one of N replicas, with pg_tenure and psycopg 3.

    singleton_job.py [--lease NAME] [--holder NAME] [--ttl-ms N] [--job-ms N]
                     [--job-table NAME] [--session-bound=false] [CONNINFO]

Every ttl/3 the campaign loop calls tenure.acquire(lease, holder, wait =>
ttl/3, session_bound => ...) in autocommit: a renewal for the leader, a
campaign for the others, who sleep inside the call until the lease frees up.
A new tenure may first wait out its predecessor's hold-off: await_active().
The client rule decides is_leader(): we lead until the send time of our last
successful acquire + ttl, on our monotonic clock (time spent waiting inside
acquire counts against it).  The job presents our epoch with
set_config('tenure.tokens', ..., true), so if its table is fenced by the lease
a run that outlives the tenure cannot commit.  Losing the lease demotes (never
exits); SIGTERM releases it.  Behind a transaction pooler pass
--session-bound=false: the session would be the pooler's server connection.
Hand-off: if the lease names a preferred holder (tenure.leases.preferred) other
than us and it waits in acquire (tenure.waiters), the active leader calls
tenure.handoff(lease, holder, preferred) and campaigns as a follower; the
preferred holder's waiting acquire returns the new epoch.  A handoff that fails
with 55000 (it stopped waiting) changes nothing: we stay leader.
Output: "<time> <holder> became leader epoch=N", "lost leadership epoch=N (why)",
"job run epoch=N", "handed over to <successor> epoch=N" (the successor's epoch).
The lease must exist: tenure.create_lease('nightly-job').
"""
import argparse, datetime, os, signal, socket, sys, time
import psycopg
from psycopg import sql

p = argparse.ArgumentParser()
p.add_argument("--lease", default=os.environ.get("TENURE_LEASE", "nightly-job"))
p.add_argument("--holder", default=os.environ.get("TENURE_HOLDER", f"{socket.gethostname()}:{os.getpid()}"))
p.add_argument("--ttl-ms", type=int, default=0, help="default: the lease's ttl")
p.add_argument("--job-ms", type=int, default=100)
p.add_argument("--job-table", default="job_runs")
p.add_argument("--session-bound", type=lambda s: s.lower() in ("true", "on", "1"), default=True)
p.add_argument("conninfo", nargs="?", default="")
args = p.parse_args()
signal.signal(signal.SIGTERM, signal.default_int_handler)  # psycopg cancels the running query

def say(msg):
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%S.%fZ} {args.holder} {msg}", flush=True)

def connect():  # autocommit: each call is its own transaction; no prepared statements (PgBouncer < 1.21)
    return psycopg.connect(args.conninfo, autocommit=True, prepare_threshold=None)

epoch, active, leader, deadline, conn = None, False, False, 0.0, None

def is_leader():  # the client rule
    return epoch is not None and active and time.monotonic() < deadline

def demote(why):
    global epoch, active, leader
    if leader:
        say(f"lost leadership epoch={epoch} ({why})")
    epoch, active, leader = None, False, False

def hand_over():  # to the preferred holder, if it is not us and waits in acquire: then we are a follower
    global epoch, active, leader
    row = conn.execute("SELECT preferred FROM tenure.leases WHERE lease = %s AND preferred <> %s"
                       " AND preferred IN (SELECT holder FROM tenure.waiters WHERE lease = %s)",
                       [args.lease, args.holder, args.lease]).fetchone()
    if row is None:
        return
    try:
        e = conn.execute("SELECT tenure.handoff(%s, %s, %s)", [args.lease, args.holder, row[0]]).fetchone()[0]
    except psycopg.Error as err:
        if err.sqlstate == "55000":  # it stopped waiting: nothing changed
            say(f"handoff to {row[0]} failed, still leading: {err.diag.message_primary}")
        elif err.sqlstate == "TN001":  # our tenure expired before the handoff
            demote("our tenure ended")
        else:
            raise
        return
    say(f"handed over to {row[0]} epoch={e}")
    epoch, active, leader = None, False, False

def run_job():
    with conn.transaction():
        conn.execute("SELECT pg_catalog.set_config('tenure.tokens', %s, true)", [f"{args.lease}={epoch}"])
        started = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        conn.execute("SELECT pg_sleep(%s)", [args.job_ms / 1000])  # the work
        conn.execute(sql.SQL("INSERT INTO {} (holder, epoch, started, finished) VALUES (%s, %s, %s, clock_timestamp())")
                     .format(sql.Identifier(args.job_table)), [args.holder, epoch, started])

try:
    conn = connect()
    row = conn.execute("SELECT extract(epoch FROM ttl)::float8 FROM tenure.leases WHERE lease = %s", [args.lease]).fetchone()
    if row is None:
        sys.exit(f'singleton_job: lease "{args.lease}" does not exist; create it with tenure.create_lease()')
    ttl = args.ttl_ms / 1000 or row[0]
    say(f'campaigning for lease "{args.lease}" (ttl {int(ttl * 1000)} ms)')
    while True:
        step = time.monotonic()
        try:
            if conn.closed:
                conn = connect()
                say("reconnected")
            sent = time.monotonic()
            e = conn.execute("SELECT tenure.acquire(%s, %s, wait => %s, session_bound => %s)",
                             [args.lease, args.holder, datetime.timedelta(seconds=0 if epoch else ttl / 3),
                              args.session_bound]).fetchone()[0]
            if e != epoch:
                demote("another holder has the lease" if e is None else "our tenure ended")
            epoch, deadline = e, sent + ttl
            if epoch is not None and not active:  # sleep out the hold-off, then renew at once
                active = conn.execute("SELECT tenure.await_active(%s, %s, %s)",
                                      [args.lease, args.holder, datetime.timedelta(seconds=ttl / 3)]).fetchone()[0]
                continue
            if leader and not is_leader():
                demote("no renewal within the ttl")
            if is_leader():  # only an active leader hands over: the successor is active at once
                hand_over()
            if is_leader() and time.monotonic() + args.job_ms / 1000 < deadline:
                if not leader:
                    leader = True
                    say(f"became leader epoch={epoch}")
                run_job()
                say(f"job run epoch={epoch}")
        except psycopg.Error as err:
            if err.sqlstate == "TN002":
                say(f"job run fenced: {err.diag.message_primary}")
                demote("fenced")
            elif conn.closed:
                demote(f"connection lost: {err}".strip())
            else:
                say(f"failed: {err}")
        time.sleep(max(0.0, step + ttl / 3 - time.monotonic()))
except KeyboardInterrupt:  # SIGTERM or SIGINT: release even a tenure whose acquire we did not see return
    release = "SELECT tenure.release(%s, %s)"
    try:
        released = conn is not None and not conn.closed and \
            conn.execute(release, [args.lease, args.holder]).fetchone()[0]
    except psycopg.Error:  # the signal hit inside the driver, which left the connection mid-command
        conn.close()  # (ends a session-bound tenure; the release below then finds nothing)
        with connect() as fresh:
            released = fresh.execute(release, [args.lease, args.holder]).fetchone()[0]
    say(("stopping; released" + (f" epoch={epoch}" if epoch else "")) if released else "stopping")
