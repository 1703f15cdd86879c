#!/usr/bin/env python3
"""Measure pg_tenure's failover under pg_auto_failover.

    ha.py WORKDIR TRIALS CSV SUMMARY

Run by bench/ha.sh as an unprivileged user, with pg_autoctl, pg_ctl, initdb
and psql on PATH and pg_tenure installed in that PostgreSQL.  Builds a
monitor and two nodes in WORKDIR (pg_tenure preloaded through an include
after pg_autoctl's own), then runs TRIALS trials of each kind, alternating:

  switchover  `pg_autoctl perform failover` (a planned switchover)
  kill        SIGKILL of the primary's postmaster and of its pg_autoctl
              (its whole process group): the node is gone

Two leases, each fencing its own table, are campaigned for by two clients
each (threads, one connection each, through a read-write multi-host
conninfo): `auto` has the automatic hold-off, `zero` has holdoff 0; both
have ttl TTL_MS.  A client calls tenure.acquire every ttl/3 (wait ttl/3
while another leads), waits out a new tenure's hold-off with
tenure.await_active, and while it leads by the client rule writes numbered
rows to its lease's fenced table, presenting its epoch in each transaction
with set_config('tenure.tokens', ..., true).  A lost connection is retried
every RETRY_MS.  A probe polls the node that takes over, directly, every
PROBE_MS.

Times, from the instant the failover command is started or the kill is
sent (one monotonic clock in this process), in milliseconds:

  promoted      the probe first sees the new primary out of recovery
  monitor       the monitor reports it wait_primary or primary
  rw            the probe's first committed INSERT (unfenced) there
  command       `pg_autoctl perform failover` returns (switchover only)
  <lease>_leader  a client's new tenure there is active
                (tenure.await_active returns true)
  <lease>_write   the first fenced write under the new epoch commits

Safety, asserted in every trial (exit status 1 if violated): the first
epoch issued on the new primary exceeds every epoch issued before, and
tenure.history agrees per timeline; every fenced write that a standby had
flushed when its COMMIT returned is on the new primary, and no write
rejected with TN002 is; every older token gets TN002 there; for the
automatic hold-off, never two leaders by the client rule.

pg_auto_failover runs the primary without a synchronous standby while it
judges the standby unhealthy (wait_primary, also right after each
failover); a write acknowledged then may be lost by a failover, with or
without pg_tenure.  So right after each COMMIT the writer asks its node
whether a standby has flushed the WAL up to there, as synchronous
replication ensures (unless other WAL came in the meantime); only those
writes must survive, the others are counted.  pg_autoctl 2.0 reads
synchronous_standby_names once, as a node enters the primary state, and
leaves it empty if the standby's goal is not secondary at that moment; a
converged primary found without it has the monitor apply the formation's
settings again, as an operator would.

Writes one CSV row per trial to CSV and the summary table (markdown) to
SUMMARY.
"""
import collections
import csv
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

import psycopg

TTL = int(os.environ.get("TTL_MS", "2000")) / 1000
RETRY = int(os.environ.get("RETRY_MS", "100")) / 1000
PROBE = int(os.environ.get("PROBE_MS", "20")) / 1000
WRITE_PAUSE = int(os.environ.get("WRITE_PAUSE_MS", "20")) / 1000
DEADLINE = int(os.environ.get("DEADLINE_S", "180"))
# the monitor's failure detection, lowered from the defaults (health checks
# every 20 s, unhealthy after 20 s, demote timeout 30 s) as in
# test/t/190_auto_failover.pl
MONITOR_SETTINGS = [
    "health_check_period = 1000",
    "health_check_timeout = 1000",
    "health_check_retry_delay = 500",
    "health_check_max_retries = 1",
    "node_considered_unhealthy_timeout = 3000",
    "primary_demote_timeout = 5000",
]
LEASES = {"auto": "NULL", "zero": "'0'"}   # lease -> holdoff
NODES = ("n1", "n2")
PG_CTL = shutil.which("pg_ctl")

now = time.monotonic
work, trials, csv_path, summary_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sock = os.path.join(work, "s")
log_dir = os.path.join(work, "log")
# pg_autoctl keeps its configuration, state and pid files under these
os.environ.update(XDG_CONFIG_HOME=os.path.join(work, "xdgc"), XDG_DATA_HOME=os.path.join(work, "xdgd"),
                  XDG_RUNTIME_DIR=os.path.join(work, "xdgr"), PGHOST=sock)
for d in (sock, log_dir, os.environ["XDG_CONFIG_HOME"], os.environ["XDG_DATA_HOME"], os.environ["XDG_RUNTIME_DIR"]):
    os.makedirs(d, exist_ok=True)
runs = {}          # name -> Popen of `pg_autoctl run`
stop = threading.Event()


def say(msg):
    print(f"ha: {msg}", flush=True)


class Violation(Exception):
    pass


def free_port():
    """A random high port nothing listens on (TCP on 127.0.0.1)."""
    while True:
        p = random.randrange(20000, 60000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
                return p
            except OSError:
                continue


port = {}
for name in ("mon",) + NODES:
    while True:
        p = free_port()
        if p not in port.values():
            port[name] = p
            break


def poll_until(what, cond, timeout=DEADLINE, interval=0.05):
    end = now() + timeout
    while now() < end:
        if cond():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what}")


def autoctl(*args, check=True):
    r = subprocess.run(["pg_autoctl", *args], capture_output=True, text=True, timeout=180)
    if check and r.returncode != 0:
        raise RuntimeError(f"pg_autoctl {' '.join(args)} failed:\n{r.stderr}")
    return r


def start_run(name):
    logf = open(os.path.join(log_dir, f"{name}.log"), "ab")
    runs[name] = subprocess.Popen(["pg_autoctl", "run", "--pgdata", os.path.join(work, name)],
                                  stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                  start_new_session=True)


def conninfo(target):
    if target == "rw":
        c = (f"host=127.0.0.1,127.0.0.1 port={port['n1']},{port['n2']} dbname=app "
             "target_session_attrs=read-write connect_timeout=2")
    else:
        db = "pg_auto_failover" if target == "mon" else "app"
        c = f"host=127.0.0.1 port={port[target]} dbname={db} connect_timeout=2"
    return c


def connect(target):
    return psycopg.connect(conninfo(target), autocommit=True, prepare_threshold=None)


def query(target, sql, params=None):
    with connect(target) as c:
        cur = c.execute(sql, params)
        return cur.fetchall() if cur.description else None


def states():
    """name -> (reported, assigned) from the monitor; {} if it does not answer."""
    try:
        return {n: (r, g) for n, r, g in
                query("mon", "SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node")}
    except psycopg.Error:
        return {}


def converged(**want):
    s = states()
    return all(s.get(n) == (st, st) for n, st in want.items())


def primary():
    s = states()
    p = [n for n in NODES if s.get(n) == ("primary", "primary")]
    return p[0] if len(p) == 1 else None


def initdb(name, *includes):
    d = os.path.join(work, name)
    subprocess.run(["initdb", "-D", d, "-A", "trust"], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(d, "postgresql.conf"), "a") as f:
        f.write("".join(f"include '{work}/{i}'\n" for i in includes))


# --- the cluster: the monitor, then two nodes (doc/high-availability.md,
# "Failover under pg_auto_failover")
def build():
    with open(os.path.join(work, "sock.conf"), "w") as f:
        f.write(f"unix_socket_directories = '{sock}'\nlisten_addresses = '127.0.0.1'\n")
    with open(os.path.join(work, "tenure.conf"), "w") as f:
        f.write("shared_preload_libraries = 'pg_stat_statements,pg_tenure'\n")
    # initdb first, so that the include is there when pg_autoctl first
    # starts it (otherwise the start fails on /var/run/postgresql)
    initdb("mon", "sock.conf")
    autoctl("create", "monitor", "--pgdata", os.path.join(work, "mon"), "--pgport", str(port["mon"]),
            "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", PG_CTL)
    autoctl("config", "set", "--pgdata", os.path.join(work, "mon"), "postgresql.listen_addresses", "127.0.0.1")
    start_run("mon")
    poll_until("the monitor", lambda: subprocess.run(["pg_isready", "-q", "-h", sock, "-p", str(port["mon"])]).returncode == 0)
    poll_until("the monitor's extension", monitor_ready)
    for s in MONITOR_SETTINGS:
        query("mon", f"ALTER SYSTEM SET pgautofailover.{s}")
    query("mon", "SELECT pg_reload_conf()")
    # pg_autoctl includes its own file on the first line: later lines win
    initdb("n1", "sock.conf", "tenure.conf")
    for n in NODES:
        autoctl("create", "postgres", "--pgdata", os.path.join(work, n), "--pgport", str(port[n]),
                "--listen", "127.0.0.1", "--hostname", "127.0.0.1", "--name", n,
                "--dbname", "app", "--auth", "trust", "--no-ssl", "--pgctl", PG_CTL,
                "--monitor", f"postgres://autoctl_node@127.0.0.1:{port['mon']}/pg_auto_failover?sslmode=disable")
        start_run(n)
        poll_until(f"{n} to join", lambda: any(converged(**{n: st}) for st in ("single", "secondary")))
    poll_until("n1 primary, n2 secondary", lambda: converged(n1="primary", n2="secondary"))
    with connect("rw") as c:
        c.execute("CREATE EXTENSION pg_tenure")
        c.execute("CREATE TABLE public.probe (t timestamptz DEFAULT clock_timestamp())")
        for lease, holdoff in LEASES.items():
            c.execute(f"SELECT tenure.create_lease(%s, ttl => %s, holdoff => {holdoff})",
                      [lease, f"{int(TTL * 1000)} ms"])
            c.execute(f"CREATE TABLE public.ledger_{lease} (holder text, seq int, epoch bigint, PRIMARY KEY (holder, seq))")
            c.execute(f"SELECT tenure.fence_table('public.ledger_{lease}', %s)", [lease])


def monitor_ready():
    try:
        query("mon", "SELECT 1 FROM pgautofailover.node LIMIT 1")
        return True
    except psycopg.Error:
        return False


# --- the clients
Event = collections.namedtuple("Event", "kind holder lease sent recv port epoch result seq",
                               defaults=(None, None))
events = []                 # appended by the clients (list.append is atomic)
errors = collections.Counter()   # (where, sqlstate or class) -> count, reset per trial


def note_error(where, err):
    """Count an error by SQLSTATE, or for a connection error by its cause."""
    code = getattr(err, "sqlstate", None)
    if code is None:
        msg = str(err)
        causes = [c for c, m in (("refused", "refused"), ("read-only", "read-only"),
                                 ("standby", "hot standby"), ("lost", "closed"), ("lost", "terminat"))
                  if m in msg]
        code = "conn:" + "+".join(sorted(set(causes))) if causes else type(err).__name__
    errors[(where, code)] += 1


def client(lease, holder):
    conn, epoch, active, deadline, seq, fenced = None, None, False, 0.0, 0, False
    last_step = -1e9
    while not stop.is_set():
        try:
            if conn is None or conn.closed:
                conn = connect("rw")
            if now() >= last_step + TTL / 3:
                last_step = sent = now()
                # a campaign step: renew (no wait) or campaign (wait ttl/3)
                p, e = conn.execute("SELECT inet_server_port(), tenure.acquire(%s, %s, wait => %s::interval)",
                                    [lease, holder, "0" if epoch else f"{int(TTL * 1000 / 3)} ms"]).fetchone()
                events.append(Event("campaign", holder, lease, sent, now(), p, e))
                if e != epoch:
                    epoch, active, fenced = e, False, False
                if e is not None:
                    deadline = sent + TTL
                if e is not None and not active:
                    active = conn.execute("SELECT tenure.await_active(%s, %s, %s::interval)",
                                          [lease, holder, f"{int(TTL * 1000)} ms"]).fetchone()[0]
                    if active:
                        events.append(Event("lead", holder, lease, sent, now(), p, e))
                    continue
            if epoch is not None and active and not fenced and now() < deadline:
                seq += 1
                t0 = now()
                try:
                    with conn.transaction():
                        p = conn.execute("SELECT inet_server_port(), set_config('tenure.tokens', %s, true)",
                                         [f"{lease}={epoch}"]).fetchone()[0]
                        conn.execute(f"INSERT INTO public.ledger_{lease} VALUES (%s, %s, %s)", [holder, seq, epoch])
                    t1 = now()
                    # after the COMMIT, flushed here: has a standby flushed as far?
                    flushed = conn.execute("SELECT EXISTS (SELECT FROM pg_stat_replication "
                                           "WHERE flush_lsn >= pg_current_wal_flush_lsn())").fetchone()[0]
                    events.append(Event("write", holder, lease, t0, t1, p, epoch,
                                        "ack" if flushed else "ack_local", seq))
                except psycopg.Error as err:
                    r = "tn002" if err.sqlstate == "TN002" else "err"
                    fenced = r == "tn002"     # never retry a fenced epoch
                    events.append(Event("write", holder, lease, t0, now(), None, epoch, r, seq))
                    raise
                stop.wait(WRITE_PAUSE)
            else:
                stop.wait(min(0.05, max(0.0, last_step + TTL / 3 - now())))
        except psycopg.Error as err:
            note_error("client", err)
            if conn is not None and conn.closed:
                # a new connection: the server may be another one
                epoch, active = None, False
                stop.wait(RETRY)


def watch_monitor(target, t0, out):
    """Poll the monitor: when it first reports the node taking over as a primary."""
    conn = None
    while not stop.is_set() and "monitor" not in out:
        try:
            if conn is None or conn.closed:
                conn = connect("mon")
            st = conn.execute("SELECT reportedstate::text FROM pgautofailover.node WHERE nodename = %s",
                              [target]).fetchone()[0]
            if st in ("wait_primary", "primary"):
                out["monitor"] = now() - t0
        except psycopg.Error as err:
            note_error("monitor", err)
        time.sleep(PROBE)
    if conn is not None:
        conn.close()


def probe(target, t0, out):
    """Poll the node taking over: when it leaves recovery, when a write commits."""
    conn = None
    while not stop.is_set() and "rw" not in out:
        try:
            if conn is None or conn.closed:
                conn = connect(target)
            if "promoted" not in out:
                if not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                    out["promoted"] = now() - t0
            if "promoted" in out:
                conn.execute("INSERT INTO public.probe DEFAULT VALUES")
                out["rw"] = now() - t0
        except psycopg.Error as err:
            note_error("probe", err)
        time.sleep(PROBE)
    if conn is not None:
        conn.close()


# --- checks
def since(t, kind, lease=None, port_=None):
    return [e for e in list(events) if e.kind == kind and e.recv > t
            and (lease is None or e.lease == lease) and (port_ is None or e.port == port_)]


def check(what, t0, new, lease):
    """Safety after a failover to node `new` that began at t0."""
    ev = list(events)
    camp = [e for e in ev if e.kind == "campaign" and e.lease == lease and e.epoch is not None]
    on_new = [e.epoch for e in camp if e.port == port[new] and e.recv > t0]
    old = [e.epoch for e in camp if not (e.port == port[new] and e.recv > t0)]
    if not on_new or not old or min(on_new) <= max(old):
        raise Violation(f"{what}/{lease}: first epoch on the new primary {min(on_new, default=None)} "
                        f"does not exceed every earlier epoch {max(old, default=None)}")
    tli = query(new, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")[0][0]
    ok = query(new, "SELECT coalesce(min(epoch) FILTER (WHERE issued_tli = %s), 0) > "
               "coalesce(max(epoch) FILTER (WHERE issued_tli < %s), 0) FROM tenure.history WHERE lease = %s",
               [tli, tli, lease])[0][0]
    if not ok:
        raise Violation(f"{what}/{lease}: tenure.history: epochs of timeline {tli} do not exceed earlier ones")
    stale = 0
    for e in sorted(set(old)):
        try:
            with connect(new) as c, c.transaction():
                c.execute("SELECT set_config('tenure.tokens', %s, true)", [f"{lease}={e}"])
                c.execute(f"INSERT INTO public.ledger_{lease} VALUES ('stale', -1, %s)", [e])
            raise Violation(f"{what}/{lease}: old token {e} committed on the new primary")
        except psycopg.Error as err:
            if err.sqlstate != "TN002":
                raise Violation(f"{what}/{lease}: old token {e}: {err.sqlstate} {err}, not TN002")
            stale += 1
    have = {tuple(r) for r in query(new, f"SELECT holder, seq, epoch FROM public.ledger_{lease}")}
    acked = [(e.holder, e.seq, e.epoch) for e in ev if e.kind == "write" and e.lease == lease and e.result == "ack"]
    lost = [w for w in acked if w not in have]
    if lost:
        raise Violation(f"{what}/{lease}: {len(lost)} writes that a standby had flushed at their COMMIT "
                        f"are missing, e.g. {lost[:3]}")
    acked_local = [e for e in ev if e.kind == "write" and e.lease == lease and e.result == "ack_local"]
    bad = [(e.holder, e.seq, e.epoch) for e in ev
           if e.kind == "write" and e.lease == lease and e.result == "tn002" and (e.holder, e.seq, e.epoch) in have]
    if bad:
        raise Violation(f"{what}/{lease}: writes rejected with TN002 are there: {bad[:3]}")
    return stale, len(acked), len(acked_local)


def check_client_rule(lease):
    """Never two leaders by the client rule: [lead observed, last acquire sent + ttl]."""
    start, last = {}, {}
    for e in list(events):
        if e.lease != lease or e.epoch is None:
            continue
        if e.kind == "campaign":
            last[(e.holder, e.epoch)] = e.sent
        elif e.kind == "lead":
            start.setdefault((e.holder, e.epoch), e.recv)
    iv = sorted((start[k], last[k] + TTL, k) for k in start if k in last)
    for i in range(len(iv)):
        for j in range(i):
            if iv[j][2][0] != iv[i][2][0] and iv[j][1] > iv[i][0]:
                raise Violation(f"{lease}: two leaders by the client rule: {iv[j][2]} until {iv[j][1]:.3f}, "
                                f"{iv[i][2]} from {iv[i][0]:.3f}")
    return len(iv)


last_nudge = [0.0, 0.0]     # last look, last nudge


def nudge_sync():
    """A converged primary without synchronous_standby_names: have the
    monitor send it the formation's settings again (a look at most every
    second, a nudge at most every 5 s)."""
    if now() < last_nudge[0] + 1:
        return
    last_nudge[0] = now()
    p = primary()
    if p is None or now() < last_nudge[1] + 5:
        return
    try:
        if query(p, "SHOW synchronous_standby_names")[0][0] != "":
            return
        last_nudge[1] = now()
        say(f"{p} is primary without synchronous_standby_names: re-applying the formation's settings")
        query("mon", "SELECT pgautofailover.set_formation_number_sync_standbys('default', 0)")
    except psycopg.Error as err:
        note_error("nudge", err)


def wait_steady(after):
    """Both leases have a fenced write started after `after` that a standby
    had flushed at its COMMIT."""
    for lease in LEASES:
        def synced():
            nudge_sync()
            return any(e.kind == "write" and e.lease == lease and e.result == "ack" and e.sent > after
                       for e in list(events))
        poll_until(f"a replicated fenced write of {lease}", synced)


def postmaster_pid(name):
    with open(os.path.join(work, name, "postmaster.pid")) as f:
        return int(f.readline())


def trial(kind, i):
    old = primary()
    new = "n2" if old == "n1" else "n1"
    errors.clear()
    res = {}
    if kind == "kill":
        pm, pgid = postmaster_pid(old), runs[old].pid
    t0 = now()
    for f in (probe, watch_monitor):
        threading.Thread(target=f, args=(new, t0, res), daemon=True).start()
    if kind == "switchover":
        autoctl("perform", "failover", "--pgdata", os.path.join(work, "mon"))
        res["command"] = now() - t0
    else:
        os.kill(pm, signal.SIGKILL)
        os.killpg(pgid, signal.SIGKILL)
        runs[old].wait()
    poll_until(f"{new} to take over", lambda: (states().get(new) or ("", ""))[0] in ("wait_primary", "primary"))
    row = {"kind": kind, "trial": i, "from": old, "to": new}
    for lease in LEASES:
        poll_until(f"{lease}: a fenced write under a new epoch on {new}",
                   lambda: any(e.kind == "write" and e.lease == lease and e.result.startswith("ack")
                               and e.port == port[new] and e.sent > t0 for e in list(events)))
        lead = min(e.recv for e in since(t0, "lead", lease, port[new]))
        write = min(e.recv for e in since(t0, "write", lease, port[new]) if e.result.startswith("ack"))
        row[f"{lease}_leader_ms"] = round((lead - t0) * 1000, 1)
        row[f"{lease}_write_ms"] = round((write - t0) * 1000, 1)
    poll_until("the probe", lambda: "rw" in res and "monitor" in res)
    for k in ("promoted", "monitor", "rw", "command"):
        row[f"{k}_ms"] = round(res[k] * 1000, 1) if k in res else ""
    for lease in LEASES:
        stale, acked, acked_local = check(f"{kind} {i}", t0, new, lease)
        row[f"{lease}_stale_tn002"] = stale
        row[f"{lease}_acked_total"] = acked
        row[f"{lease}_local_acked_total"] = acked_local
    check_client_rule("auto")
    row["tn002_stale_leader"] = sum(1 for e in since(t0, "write") if e.result == "tn002")
    row["client_errors"] = " ".join(f"{w}:{c}x{n}" for (w, c), n in sorted(errors.items()))
    # back to a primary and a synchronous secondary
    if kind == "kill":
        start_run(old)
    poll_until(f"{new} primary, {old} secondary", lambda: converged(**{new: "primary", old: "secondary"}))
    wait_steady(now())
    say(" ".join(f"{k}={v}" for k, v in row.items()))
    return row


FIELDS = ["kind", "trial", "from", "to", "promoted_ms", "monitor_ms", "rw_ms", "auto_leader_ms", "auto_write_ms",
          "zero_leader_ms", "zero_write_ms", "command_ms", "auto_stale_tn002", "zero_stale_tn002",
          "auto_acked_total", "zero_acked_total", "auto_local_acked_total", "zero_local_acked_total",
          "tn002_stale_leader", "client_errors"]


def summary(rows):
    """The summary table: p50 and max per kind, and what every trial checked."""
    kinds = ("switchover", "kill")
    by = {k: [r for r in rows if r["kind"] == k] for k in kinds}
    lines = [
        f"Times in ms from the failure (`pg_autoctl perform failover` started; SIGKILL sent), "
        f"p50 / max over the trials; leases with ttl {int(TTL * 1000)} ms, clients reconnect every "
        f"{int(RETRY * 1000)} ms, the probe polls every {int(PROBE * 1000)} ms.",
        "",
        "| until | " + " | ".join(f"{k} (n={len(by[k])})" for k in kinds) + " |",
        "| --- | " + " | ".join("---:" for _ in kinds) + " |",
    ]
    what = [
        ("promoted_ms", "the new primary is out of recovery (`pg_is_in_recovery()` false)"),
        ("monitor_ms", "the monitor reports it `wait_primary` or `primary`"),
        ("rw_ms", "it accepts writes (an unfenced INSERT commits)"),
        ("auto_leader_ms", "automatic hold-off: the new leader is active (`await_active`)"),
        ("auto_write_ms", "automatic hold-off: first fenced write under the new epoch commits"),
        ("zero_leader_ms", "`holdoff => '0'`: the new leader is active"),
        ("zero_write_ms", "`holdoff => '0'`: first fenced write under the new epoch commits"),
        ("command_ms", "`pg_autoctl perform failover` returns"),
    ]
    for col, label in what:
        cells = []
        for k in kinds:
            v = [float(r[col]) for r in by[k] if r[col] != ""]
            cells.append(f"{statistics.median(v):.0f} / {max(v):.0f}" if v else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    n = len(rows)
    acked = sum(int(rows[-1][f"{l}_acked_total"]) for l in LEASES) if rows else 0
    acked_local = sum(int(rows[-1][f"{l}_local_acked_total"]) for l in LEASES) if rows else 0
    stale = sum(int(r[f"{l}_stale_tn002"]) for r in rows for l in LEASES)
    errs = collections.Counter()
    for r in rows:
        for item in r["client_errors"].split():
            key, _, cnt = item.rpartition("x")
            errs[(r["kind"], key)] += int(cnt)
    lines += [
        "",
        f"Safety, checked after each of the {n} trials: the first epoch issued on the new primary exceeded "
        f"every epoch issued before (and `tenure.history` agreed per timeline); all {acked} fenced writes "
        f"that a standby had flushed when their COMMIT returned were on the new primary ({acked_local} more "
        "were acknowledged before a standby had them, as pg_auto_failover allows while it runs the primary "
        f"without a synchronous standby, and need not survive a failover) and no write rejected with TN002 "
        f"was; the older tokens "
        f"({stale} checks in all) got TN002 there; the automatic hold-off lease never had two leaders by the "
        "client rule.",
        "",
        "Errors clients saw, over all trials (client: the campaigners; probe: the poller of the new primary; "
        "conn: connection failures by cause):",
        "",
    ]
    for k in kinds:
        lines.append(f"- {k}: " + (", ".join(f"{key} {c}" for (kk, key), c in sorted(errs.items()) if kk == k)
                                   or "none"))
    return "\n".join(lines) + "\n"


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def cleanup():
    stop.set()
    # Let each postmaster end its children before anything is killed: the
    # monitor's health check worker outlives a SIGKILLed postmaster, and
    # keeps its logger alive with it.
    for name in NODES + ("mon",):
        if name in runs:
            try:
                pm = postmaster_pid(name)
            except (OSError, ValueError):
                pm = None
            autoctl("stop", "--pgdata", os.path.join(work, name), "--immediate", check=False)
            end = now() + 30
            while pm and alive(pm) and now() < end:
                time.sleep(0.1)
    for name, p in runs.items():
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    for name in NODES + ("mon",):
        try:
            pm = postmaster_pid(name)
        except (OSError, ValueError):
            continue
        if not alive(pm):
            continue
        kids = subprocess.run(["pgrep", "-P", str(pm)], capture_output=True, text=True).stdout.split()
        for pid in [pm] + [int(k) for k in kids]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def main():
    def on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    status = 0
    try:
        t = now()
        build()
        say(f"cluster up in {now() - t:.1f} s: monitor :{port['mon']}, n1 :{port['n1']}, n2 :{port['n2']}; "
            f"ttl {int(TTL * 1000)} ms")
        threads = [threading.Thread(target=client, args=(lease, f"c{k}"), daemon=True)
                   for lease in LEASES for k in (1, 2)]
        for th in threads:
            th.start()
        wait_steady(now())
        rows = []
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, FIELDS)
            w.writeheader()
            for i in range(1, trials + 1):
                for kind in ("switchover", "kill"):
                    rows.append(trial(kind, i))
                    w.writerow(rows[-1])
                    f.flush()
        say(f"{check_client_rule('auto')} leaderships of auto, never two by the client rule")
        with open(summary_path, "w") as f:
            f.write(summary(rows))
    except Violation as v:
        say(f"SAFETY VIOLATION: {v}")
        status = 1
    except (Exception, KeyboardInterrupt) as err:
        say(f"failed: {type(err).__name__}: {err}")
        status = 2
    finally:
        cleanup()
    return status


if __name__ == "__main__":
    sys.exit(main())
