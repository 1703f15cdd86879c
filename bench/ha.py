#!/usr/bin/env python3
"""Measure pg_tenure's failover under a real HA manager.

    ha.py MANAGER WORKDIR TRIALS CSV SUMMARY

MANAGER is pg_auto_failover or patroni.  Run by bench/ha.sh as an
unprivileged user, with pg_ctl, initdb and psql on PATH, pg_tenure
installed in that PostgreSQL, and pg_autoctl or patroni, patronictl and
etcd installed.  Builds the cluster in WORKDIR (doc/high-availability.md
gives both configurations):

  pg_auto_failover  a monitor and two nodes, pg_tenure preloaded through an
                    include after pg_autoctl's own
  patroni           one etcd member and two Patroni nodes in synchronous
                    mode (ttl 20 s, loop_wait 1 s, retry_timeout 3 s),
                    pg_tenure in postgresql.parameters

then runs TRIALS trials of each kind, alternating:

  switchover  `pg_autoctl perform failover` / `patronictl switchover` (a
              planned switchover)
  kill        SIGKILL of the primary's postmaster and of its manager
              (pg_autoctl's whole process group, or Patroni): the node is
              gone until the next trial brings it back as a standby

Two leases, each fencing its own table, are campaigned for by two clients
each (threads, one connection each, through a read-write multi-host
conninfo): `auto` has the automatic hold-off, `zero` has holdoff 0; both
have ttl TTL_MS.  A client that holds a tenure renews it every ttl/3 with
tenure.renew (no wait); one that does not calls tenure.acquire with a wait
of ttl/3, then waits out a new tenure's hold-off with tenure.await_active.
While it leads by the client rule (renew true and leader_is true, or
await_active true, less than ttl after the step was sent) it writes
numbered rows to its lease's fenced table, presenting its epoch in each
transaction with set_config('tenure.tokens', ..., true).  A lost
connection, or one to a server that went read-only, is replaced every
RETRY_MS; the client keeps its tenure and renews it first.  A probe polls
the node that takes over, directly, every PROBE_MS.

Times, from the instant the failover command is started or the kill is
sent (one monotonic clock in this process), in milliseconds:

  promoted        the probe first sees the new primary out of recovery
  manager         the manager reports it as the primary (the monitor:
                  wait_primary or primary; Patroni's REST API: leader)
  rw              the probe's first committed INSERT (unfenced) there
  command         the switchover command returns (switchover only)
  <lease>_leader  leadership is confirmed there: the holder's renew
                  returns true with leader_is true (its tenure continued),
                  or a new tenure is active (await_active returns true)
  <lease>_write   the first fenced write there commits
  <lease>_gap     how long nobody led by the client rule: from the last
                  belief before the failure (step sent + ttl) to the
                  confirmation; 0 if the leadership never lapsed
  <lease>_continued  1 if a tenure continued (the promotion kept every
                  transaction of the old primary), else 0

Safety, asserted in every trial (exit status 1 if violated): no tenure
continues through a kill; every epoch issued on the new primary exceeds
every epoch issued before, and tenure.history agrees per timeline; every
fenced write that a standby had flushed when its COMMIT returned is on the
new primary, and no write rejected with TN002 is; every older token but
a continued tenure's gets TN002 there; for the automatic hold-off, never
two leaders by the client rule.

Both managers may run the primary without a synchronous standby
(pg_auto_failover in wait_primary, also right after each failover;
Patroni's synchronous mode while the standby is away); a write
acknowledged then may be lost by a failover, with or without pg_tenure.
So right after each COMMIT the writer asks its node whether a standby has
flushed the WAL up to there, as synchronous replication ensures (unless
other WAL came in the meantime); only those writes must survive, the
others are counted.  pg_autoctl 2.0 reads synchronous_standby_names once,
as a node enters the primary state, and leaves it empty if the standby's
goal is not secondary at that moment; a converged primary found without
it has the monitor apply the formation's settings again, as an operator
would.

Writes one CSV row per trial to CSV and the summary (markdown) to SUMMARY.
"""
import collections
import csv
import json
import os
import pwd
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import psycopg

TTL = int(os.environ.get("TTL_MS", "2000")) / 1000
RETRY = int(os.environ.get("RETRY_MS", "100")) / 1000
PROBE = int(os.environ.get("PROBE_MS", "20")) / 1000
WRITE_PAUSE = int(os.environ.get("WRITE_PAUSE_MS", "20")) / 1000
DEADLINE = int(os.environ.get("DEADLINE_S", "180"))
LEASES = {"auto": "NULL", "zero": "'0'"}   # lease -> holdoff
NODES = ("n1", "n2")
PG_CTL = shutil.which("pg_ctl")

now = time.monotonic
manager_name, work, trials, csv_path, summary_path = (
    sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
sock = os.path.join(work, "s")
log_dir = os.path.join(work, "log")
# what bench/ha.sh kills if this driver was killed: a pid per line
pid_file = os.path.join(work, "pids")
for d in (sock, log_dir):
    os.makedirs(d, exist_ok=True)
runs = {}          # name -> Popen of a node's manager (or the monitor, or etcd)
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
for name in ("mon", "etcd", "etcd_peer", "api_n1", "api_n2") + NODES:
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


def start_run(name, cmd):
    """Start a long-running process in a session of its own, logging to log/NAME.log."""
    logf = open(os.path.join(log_dir, f"{name}.log"), "ab")
    runs[name] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    with open(pid_file, "a") as f:
        f.write(f"{runs[name].pid}\n")


def conninfo(target, db="app"):
    if target == "rw":
        return (f"host=127.0.0.1,127.0.0.1 port={port['n1']},{port['n2']} dbname={db} "
                "target_session_attrs=read-write connect_timeout=2")
    return f"host=127.0.0.1 port={port[target]} dbname={db} connect_timeout=2"


def connect(target, db="app"):
    return psycopg.connect(conninfo(target, db), autocommit=True, prepare_threshold=None)


def query(target, sql, params=None, db="app"):
    with connect(target, db) as c:
        cur = c.execute(sql, params)
        return cur.fetchall() if cur.description else None


def postmaster_pid(name):
    with open(os.path.join(work, name, "postmaster.pid")) as f:
        return int(f.readline())


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def create_objects():
    """The extension, the probe's table, the leases and their fenced tables."""
    with connect("rw") as c:
        c.execute("CREATE EXTENSION pg_tenure")
        c.execute("CREATE TABLE public.probe (t timestamptz DEFAULT clock_timestamp())")
        for lease, holdoff in LEASES.items():
            c.execute(f"SELECT tenure.create_lease(%s, ttl => %s, holdoff => {holdoff})",
                      [lease, f"{int(TTL * 1000)} ms"])
            c.execute(f"CREATE TABLE public.ledger_{lease} (holder text, seq int, epoch bigint, PRIMARY KEY (holder, seq))")
            c.execute(f"SELECT tenure.fence_table('public.ledger_{lease}', %s)", [lease])


class AutoFailover:
    """pg_auto_failover 2.0: a monitor and two nodes (doc/high-availability.md,
    "Failover under pg_auto_failover")."""

    title = "pg_auto_failover"
    switchover_command = "`pg_autoctl perform failover`"
    kill_what = "its postmaster and its `pg_autoctl`"
    poll = PROBE
    # the monitor's failure detection, lowered from the defaults (health
    # checks every 20 s, unhealthy after 20 s, demote timeout 30 s) as in
    # test/t/190_auto_failover.pl
    MONITOR_SETTINGS = [
        "health_check_period = 1000",
        "health_check_timeout = 1000",
        "health_check_retry_delay = 500",
        "health_check_max_retries = 1",
        "node_considered_unhealthy_timeout = 3000",
        "primary_demote_timeout = 5000",
    ]

    def __init__(self):
        # pg_autoctl keeps its configuration, state and pid files under these
        os.environ.update(XDG_CONFIG_HOME=os.path.join(work, "xdgc"), XDG_DATA_HOME=os.path.join(work, "xdgd"),
                          XDG_RUNTIME_DIR=os.path.join(work, "xdgr"), PGHOST=sock)
        for d in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"):
            os.makedirs(os.environ[d], exist_ok=True)
        self.last_nudge = [0.0, 0.0]     # last look, last nudge
        self.watch_conn = None

    def autoctl(self, *args, check=True):
        r = subprocess.run(["pg_autoctl", *args], capture_output=True, text=True, timeout=180)
        if check and r.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args)} failed:\n{r.stderr}")
        return r

    def start(self, name):
        start_run(name, ["pg_autoctl", "run", "--pgdata", os.path.join(work, name)])

    def states(self):
        """name -> (reported, assigned) from the monitor; {} if it does not answer."""
        try:
            return {n: (r, g) for n, r, g in
                    query("mon", "SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node",
                          db="pg_auto_failover")}
        except psycopg.Error:
            return {}

    def converged(self, **want):
        s = self.states()
        return all(s.get(n) == (st, st) for n, st in want.items())

    def primary(self):
        s = self.states()
        p = [n for n in NODES if s.get(n) == ("primary", "primary")]
        return p[0] if len(p) == 1 else None

    def steady(self, new, old):
        return self.converged(**{new: "primary", old: "secondary"})

    def took_over(self, target):
        """Whether the monitor reports `target` as a primary (one connection, kept)."""
        if self.watch_conn is None or self.watch_conn.closed:
            self.watch_conn = connect("mon", db="pg_auto_failover")
        st = self.watch_conn.execute("SELECT reportedstate::text FROM pgautofailover.node WHERE nodename = %s",
                                     [target]).fetchone()[0]
        return st in ("wait_primary", "primary")

    def initdb(self, name, *includes):
        d = os.path.join(work, name)
        subprocess.run(["initdb", "-D", d, "-A", "trust"], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(d, "postgresql.conf"), "a") as f:
            f.write("".join(f"include '{work}/{i}'\n" for i in includes))

    def monitor_ready(self):
        try:
            query("mon", "SELECT 1 FROM pgautofailover.node LIMIT 1", db="pg_auto_failover")
            return True
        except psycopg.Error:
            return False

    def build(self):
        with open(os.path.join(work, "sock.conf"), "w") as f:
            f.write(f"unix_socket_directories = '{sock}'\nlisten_addresses = '127.0.0.1'\n")
        with open(os.path.join(work, "tenure.conf"), "w") as f:
            f.write("shared_preload_libraries = 'pg_stat_statements,pg_tenure'\n")
        # initdb first, so that the include is there when pg_autoctl first
        # starts it (otherwise the start fails on /var/run/postgresql)
        self.initdb("mon", "sock.conf")
        self.autoctl("create", "monitor", "--pgdata", os.path.join(work, "mon"), "--pgport", str(port["mon"]),
                     "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", PG_CTL)
        self.autoctl("config", "set", "--pgdata", os.path.join(work, "mon"),
                     "postgresql.listen_addresses", "127.0.0.1")
        self.start("mon")
        poll_until("the monitor", lambda: subprocess.run(
            ["pg_isready", "-q", "-h", sock, "-p", str(port["mon"])]).returncode == 0)
        poll_until("the monitor's extension", self.monitor_ready)
        for s in self.MONITOR_SETTINGS:
            query("mon", f"ALTER SYSTEM SET pgautofailover.{s}", db="pg_auto_failover")
        query("mon", "SELECT pg_reload_conf()", db="pg_auto_failover")
        # pg_autoctl includes its own file on the first line: later lines win
        self.initdb("n1", "sock.conf", "tenure.conf")
        for n in NODES:
            self.autoctl("create", "postgres", "--pgdata", os.path.join(work, n), "--pgport", str(port[n]),
                         "--listen", "127.0.0.1", "--hostname", "127.0.0.1", "--name", n,
                         "--dbname", "app", "--auth", "trust", "--no-ssl", "--pgctl", PG_CTL,
                         "--monitor", f"postgres://autoctl_node@127.0.0.1:{port['mon']}/pg_auto_failover?sslmode=disable")
            self.start(n)
            poll_until(f"{n} to join", lambda: any(self.converged(**{n: st}) for st in ("single", "secondary")))
        poll_until("n1 primary, n2 secondary", lambda: self.steady("n1", "n2"))

    def switchover(self, old, new):
        self.autoctl("perform", "failover", "--pgdata", os.path.join(work, "mon"))

    def kill(self, old):
        pm, pgid = postmaster_pid(old), runs[old].pid
        os.kill(pm, signal.SIGKILL)
        os.killpg(pgid, signal.SIGKILL)
        runs[old].wait()

    def rejoin(self, old):
        self.start(old)

    def nudge(self):
        """A converged primary without synchronous_standby_names: have the
        monitor send it the formation's settings again (a look at most every
        second, a nudge at most every 5 s)."""
        if now() < self.last_nudge[0] + 1:
            return
        self.last_nudge[0] = now()
        p = self.primary()
        if p is None or now() < self.last_nudge[1] + 5:
            return
        try:
            if query(p, "SHOW synchronous_standby_names")[0][0] != "":
                return
            self.last_nudge[1] = now()
            say(f"{p} is primary without synchronous_standby_names: re-applying the formation's settings")
            query("mon", "SELECT pgautofailover.set_formation_number_sync_standbys('default', 0)",
                  db="pg_auto_failover")
        except psycopg.Error as err:
            note_error("nudge", err)

    def version(self):
        r = self.autoctl("--version", check=False)
        return (r.stdout or r.stderr).splitlines()[0] if (r.stdout or r.stderr) else "pg_autoctl"

    def cleanup(self):
        # Let each postmaster end its children before anything is killed: the
        # monitor's health check worker outlives a SIGKILLed postmaster, and
        # keeps its logger alive with it.
        if self.watch_conn is not None:
            self.watch_conn.close()
        for name in NODES + ("mon",):
            if name in runs:
                try:
                    pm = postmaster_pid(name)
                except (OSError, ValueError):
                    pm = None
                self.autoctl("stop", "--pgdata", os.path.join(work, name), "--immediate", check=False)
                end = now() + 30
                while pm and alive(pm) and now() < end:
                    time.sleep(0.1)


class Patroni:
    """Patroni with one etcd member as its store (doc/high-availability.md,
    "Failover under Patroni")."""

    title = "Patroni"
    switchover_command = "`patronictl switchover`"
    kill_what = "its postmaster and its Patroni"
    poll = 0.1     # Patroni's REST API answers in Python: not every 20 ms

    def __init__(self):
        os.environ["PGHOST"] = sock
        self.bin_dir = os.path.dirname(PG_CTL)

    def config(self, n):
        user = pwd.getpwuid(os.getuid()).pw_name
        return f"""scope: bench
name: {n}
restapi:
  listen: 127.0.0.1:{port['api_' + n]}
  connect_address: 127.0.0.1:{port['api_' + n]}
etcd3:
  hosts: 127.0.0.1:{port['etcd']}
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 3
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
  initdb:
    - auth: trust
postgresql:
  listen: 127.0.0.1:{port[n]}
  connect_address: 127.0.0.1:{port[n]}
  data_dir: {work}/{n}
  bin_dir: {self.bin_dir}
  pgpass: {work}/{n}.pgpass
  remove_data_directory_on_rewind_failure: true
  basebackup:
    checkpoint: fast
  authentication:
    superuser:
      username: {user}
    replication:
      username: {user}
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  parameters:
    shared_preload_libraries: pg_tenure
    unix_socket_directories: '{sock}'
watchdog:
  mode: off
"""

    def start(self, name):
        start_run(name, ["patroni", os.path.join(work, f"{name}.yml")])

    def members(self):
        """name -> (role, state) from Patroni's REST API; {} if no node answers."""
        for n in NODES:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port['api_' + n]}/cluster", timeout=2) as r:
                    c = json.load(r)
                return {m["name"]: (m.get("role"), m.get("state")) for m in c.get("members", [])}
            except (OSError, ValueError):
                continue
        return {}

    def primary(self):
        p = [n for n, (r, s) in self.members().items() if r == "leader" and s == "running"]
        return p[0] if len(p) == 1 else None

    def steady(self, new, old):
        m = self.members()
        return m.get(new) == ("leader", "running") and m.get(old) == ("sync_standby", "running")

    def took_over(self, target):
        return (self.members().get(target) or (None, None))[0] == "leader"

    def build(self):
        client, peer = f"http://127.0.0.1:{port['etcd']}", f"http://127.0.0.1:{port['etcd_peer']}"
        start_run("etcd", ["etcd", "--name", "bench", "--data-dir", os.path.join(work, "etcd"),
                           "--listen-client-urls", client, "--advertise-client-urls", client,
                           "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                           "--initial-cluster", f"bench={peer}"])

        def etcd_healthy():
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=2) as r:
                    return json.load(r).get("health") == "true"
            except (OSError, ValueError):
                return False
        poll_until("etcd", etcd_healthy)
        for n in NODES:
            with open(os.path.join(work, f"{n}.yml"), "w") as f:
                f.write(self.config(n))
        self.start("n1")
        poll_until("n1 to lead", lambda: self.primary() == "n1")
        query("n1", "CREATE DATABASE app", db="postgres")
        self.start("n2")
        poll_until("n1 leader, n2 synchronous standby", lambda: self.steady("n1", "n2"))

    def switchover(self, old, new):
        r = subprocess.run(["patronictl", "-c", os.path.join(work, "n1.yml"), "switchover",
                            "--leader", old, "--candidate", new, "--force"],
                           capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise RuntimeError(f"patronictl switchover failed:\n{r.stdout}{r.stderr}")

    def kill(self, old):
        pm = postmaster_pid(old)
        os.kill(pm, signal.SIGKILL)
        os.killpg(runs[old].pid, signal.SIGKILL)
        runs[old].wait()

    def rejoin(self, old):
        self.start(old)

    def nudge(self):
        pass

    def version(self):
        r = subprocess.run(["patroni", "--version"], capture_output=True, text=True)
        e = subprocess.run(["etcd", "--version"], capture_output=True, text=True)
        return f"{r.stdout.strip()}, {e.stdout.splitlines()[0] if e.stdout else 'etcd'}"

    def cleanup(self):
        # every Patroni first (one that lived on would start its PostgreSQL
        # again), then the postmasters (below), then etcd
        for name in NODES:
            if name in runs:
                try:
                    os.killpg(runs[name].pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                runs[name].wait()
        for name in NODES:
            try:
                pm = postmaster_pid(name)
            except (OSError, ValueError):
                continue
            if alive(pm):
                subprocess.run([PG_CTL, "-D", os.path.join(work, name), "-m", "immediate", "stop"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


MANAGERS = {"pg_auto_failover": AutoFailover, "patroni": Patroni}
if manager_name not in MANAGERS:
    sys.exit(f"ha.py: unknown manager {manager_name}: one of {', '.join(MANAGERS)}")
manager = MANAGERS[manager_name]()


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


def client_step(conn, lease, holder, epoch):
    """One campaign step: the holder renews, anyone else acquires (waiting
    ttl/3).  Returns (port, epoch held afterwards or None, leader_is)."""
    sent = now()
    if epoch is not None:
        p, ok, li = conn.execute("SELECT inet_server_port(), r, tenure.leader_is(%s, %s) FROM tenure.renew(%s, %s) r",
                                 [lease, holder, lease, holder]).fetchone()
        events.append(Event("renew", holder, lease, sent, now(), p, epoch if ok else None, "t" if li else "f"))
        return p, epoch if ok else None, li
    p, e = conn.execute("SELECT inet_server_port(), tenure.acquire(%s, %s, wait => %s::interval)",
                        [lease, holder, f"{int(TTL * 1000 / 3)} ms"]).fetchone()
    events.append(Event("campaign", holder, lease, sent, now(), p, e))
    return p, e, False


def client(lease, holder):
    conn, epoch, active, deadline, seq, fenced = None, None, False, 0.0, 0, False
    last_step = -1e9
    while not stop.is_set():
        try:
            if conn is None or conn.closed:
                conn = connect("rw")
            if now() >= last_step + TTL / 3:
                last_step = sent = now()
                p, e, li = client_step(conn, lease, holder, epoch)
                if e is None and epoch is not None:
                    last_step = -1e9     # refused: campaign at once
                if e != epoch:
                    epoch, active, fenced = e, False, False
                if e is None:
                    continue
                deadline = sent + TTL
                active = active and li
                if not active:
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
            if conn is not None and not conn.closed and getattr(err, "sqlstate", None) == "25006":
                conn.close()     # a primary that went read-only: find the new one
            if conn is not None and conn.closed:
                # a new connection, perhaps to another server: keep the
                # tenure, and renew it first
                last_step = -1e9
                stop.wait(RETRY)


def watch_manager(target, t0, out):
    """Poll the manager: when it first reports the node taking over as the primary."""
    while not stop.is_set() and "manager" not in out:
        try:
            if manager.took_over(target):
                out["manager"] = now() - t0
        except psycopg.Error as err:
            note_error("manager", err)
        time.sleep(manager.poll)


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
STEPS = ("campaign", "renew")


def since(t, kind, lease=None, port_=None):
    return [e for e in list(events) if e.kind == kind and e.recv > t
            and (lease is None or e.lease == lease) and (port_ is None or e.port == port_)]


def check(what, kind, t0, new, lease):
    """Safety after a failover to node `new` that began at t0.  Returns
    (older tokens checked, acknowledged writes, of them local only, whether a
    tenure continued)."""
    ev = list(events)
    steps = [e for e in ev if e.kind in STEPS and e.lease == lease and e.epoch is not None]
    on_new = [e for e in steps if e.port == port[new] and e.recv > t0]
    old_holder = {e.epoch: e.holder for e in steps if not (e.port == port[new] and e.recv > t0)}
    old = set(old_holder)
    # a tenure continued: its holder renewed it, or acquired it again (which
    # renews its own tenure), through the new primary at the same epoch;
    # another holder at an old epoch is a violation
    for e in on_new:
        if e.epoch in old and e.holder != old_holder[e.epoch]:
            raise Violation(f"{what}/{lease}: {e.holder} got epoch {e.epoch} of {old_holder[e.epoch]} on the new primary")
    continued = {e.epoch for e in on_new if e.epoch in old}
    if continued and kind == "kill":
        raise Violation(f"{what}/{lease}: tenure {continued} continued through a killed primary")
    fresh = [e.epoch for e in on_new if e.epoch not in continued]
    if not on_new or not old or (fresh and min(fresh) <= max(old)):
        raise Violation(f"{what}/{lease}: first new epoch on the new primary {min(fresh, default=None)} "
                        f"does not exceed every earlier epoch {max(old, default=None)}")
    tli = query(new, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")[0][0]
    # (none issued on the new timeline: every tenure continued)
    ok = query(new, "SELECT coalesce(min(epoch) FILTER (WHERE issued_tli = %s) > "
               "coalesce(max(epoch) FILTER (WHERE issued_tli < %s), 0), true) FROM tenure.history WHERE lease = %s",
               [tli, tli, lease])[0][0]
    if not ok:
        raise Violation(f"{what}/{lease}: tenure.history: epochs of timeline {tli} do not exceed earlier ones")
    stale = 0
    for e in sorted(old - continued):
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
    return stale, len(acked), len(acked_local), bool(continued)


def check_client_rule(lease):
    """Never two leaders by the client rule: [lead observed, last step sent + ttl]."""
    start, last = {}, {}
    for e in list(events):
        if e.lease != lease or e.epoch is None:
            continue
        if e.kind in STEPS:
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


def confirmed(t0, new, lease):
    """When leadership was first confirmed on `new` after t0: a renew that
    returned true with leader_is true, or a new tenure active; None if not yet."""
    ts = [e.recv for e in since(t0, "lead", lease, port[new])]
    ts += [e.recv for e in since(t0, "renew", lease, port[new]) if e.epoch is not None and e.result == "t"]
    return min(ts, default=None)


def belief_end(t0, lease):
    """The end of the last leadership belief before t0 (step sent + ttl)."""
    return max((e.sent + TTL for e in list(events)
                if e.kind in STEPS and e.lease == lease and e.epoch is not None and e.sent < t0), default=t0)


def wait_steady(after):
    """Both leases have a fenced write started after `after` that a standby
    had flushed at its COMMIT."""
    for lease in LEASES:
        def synced():
            manager.nudge()
            return any(e.kind == "write" and e.lease == lease and e.result == "ack" and e.sent > after
                       for e in list(events))
        poll_until(f"a replicated fenced write of {lease}", synced)


def trial(kind, i):
    old = manager.primary()
    new = "n2" if old == "n1" else "n1"
    errors.clear()
    res = {}
    t0 = now()
    for f in (probe, watch_manager):
        threading.Thread(target=f, args=(new, t0, res), daemon=True).start()
    if kind == "switchover":
        manager.switchover(old, new)
        res["command"] = now() - t0
    else:
        manager.kill(old)
    poll_until(f"{new} to take over", lambda: "manager" in res)
    row = {"manager": manager_name, "kind": kind, "trial": i, "from": old, "to": new}
    for lease in LEASES:
        poll_until(f"{lease}: a fenced write on {new}",
                   lambda: any(e.kind == "write" and e.lease == lease and e.result.startswith("ack")
                               and e.port == port[new] and e.sent > t0 for e in list(events)))
        poll_until(f"{lease}: leadership confirmed on {new}", lambda: confirmed(t0, new, lease) is not None)
        lead = confirmed(t0, new, lease)
        write = min(e.recv for e in since(t0, "write", lease, port[new]) if e.result.startswith("ack"))
        row[f"{lease}_leader_ms"] = round((lead - t0) * 1000, 1)
        row[f"{lease}_write_ms"] = round((write - t0) * 1000, 1)
        row[f"{lease}_gap_ms"] = round(max(0.0, lead - belief_end(t0, lease)) * 1000, 1)
    poll_until("the probe", lambda: "rw" in res)
    for k in ("promoted", "manager", "rw", "command"):
        row[f"{k}_ms"] = round(res[k] * 1000, 1) if k in res else ""
    for lease in LEASES:
        stale, acked, acked_local, cont = check(f"{kind} {i}", kind, t0, new, lease)
        row[f"{lease}_continued"] = int(cont)
        row[f"{lease}_stale_tn002"] = stale
        row[f"{lease}_acked_total"] = acked
        row[f"{lease}_local_acked_total"] = acked_local
    check_client_rule("auto")
    row["tn002_stale_leader"] = sum(1 for e in since(t0, "write") if e.result == "tn002")
    row["client_errors"] = " ".join(f"{w}:{c}x{n}" for (w, c), n in sorted(errors.items()))
    # back to a primary and a synchronous standby
    if kind == "kill":
        manager.rejoin(old)
    poll_until(f"{new} primary, {old} synchronous standby", lambda: manager.steady(new, old))
    wait_steady(now())
    say(" ".join(f"{k}={v}" for k, v in row.items()))
    return row


FIELDS = ["manager", "kind", "trial", "from", "to", "promoted_ms", "manager_ms", "rw_ms",
          "auto_leader_ms", "auto_write_ms", "auto_gap_ms", "zero_leader_ms", "zero_write_ms", "zero_gap_ms",
          "command_ms", "auto_continued", "zero_continued", "auto_stale_tn002", "zero_stale_tn002",
          "auto_acked_total", "zero_acked_total", "auto_local_acked_total", "zero_local_acked_total",
          "tn002_stale_leader", "client_errors"]


def summary(rows):
    """The summary: p50 and max per kind, how often tenures continued, and
    what every trial checked."""
    kinds = ("switchover", "kill")
    by = {k: [r for r in rows if r["kind"] == k] for k in kinds}
    lines = [
        f"## {manager.title}",
        "",
        f"Times in ms from the failure ({manager.switchover_command} started; SIGKILL of {manager.kill_what} "
        f"sent), p50 / max over the trials; leases with ttl {int(TTL * 1000)} ms, clients reconnect every "
        f"{int(RETRY * 1000)} ms, the probe polls every {int(PROBE * 1000)} ms.",
        "",
        "| until | " + " | ".join(f"{k} (n={len(by[k])})" for k in kinds) + " |",
        "| --- | " + " | ".join("---:" for _ in kinds) + " |",
    ]
    what = [
        ("promoted_ms", "the new primary is out of recovery (`pg_is_in_recovery()` false)"),
        ("manager_ms", f"{manager.title} reports it as the primary"),
        ("rw_ms", "it accepts writes (an unfenced INSERT commits)"),
        ("auto_leader_ms", "automatic hold-off: leadership confirmed (renew true, or a new tenure active)"),
        ("auto_write_ms", "automatic hold-off: first fenced write commits"),
        ("auto_gap_ms", "automatic hold-off: nobody led by the client rule (gap)"),
        ("zero_leader_ms", "`holdoff => '0'`: leadership confirmed"),
        ("zero_write_ms", "`holdoff => '0'`: first fenced write commits"),
        ("zero_gap_ms", "`holdoff => '0'`: gap"),
        ("command_ms", f"{manager.switchover_command} returns"),
    ]
    for col, label in what:
        cells = []
        for k in kinds:
            v = [float(r[col]) for r in by[k] if r[col] != ""]
            cells.append(f"{statistics.median(v):.0f} / {max(v):.0f}" if v else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    cont = {k: sum(int(r[f"{lease}_continued"]) for r in by[k] for lease in LEASES) for k in kinds}
    n = len(rows)
    acked = sum(int(rows[-1][f"{lease}_acked_total"]) for lease in LEASES) if rows else 0
    acked_local = sum(int(rows[-1][f"{lease}_local_acked_total"]) for lease in LEASES) if rows else 0
    stale = sum(int(r[f"{lease}_stale_tn002"]) for r in rows for lease in LEASES)
    errs = collections.Counter()
    for r in rows:
        for item in r["client_errors"].split():
            key, _, cnt = item.rpartition("x")
            errs[(r["kind"], key)] += int(cnt)
    lines += [
        "",
        f"Tenures continued (the promotion kept every transaction of the old primary): "
        f"{cont['switchover']} of {len(by['switchover']) * len(LEASES)} leases through a switchover, "
        f"{cont['kill']} of {len(by['kill']) * len(LEASES)} through a kill.",
        "",
        f"Safety, checked after each of the {n} trials: no tenure continued through a kill; every new epoch "
        f"issued on the new primary exceeded every epoch issued before (and `tenure.history` agreed per "
        f"timeline); all {acked} fenced writes that a standby had flushed when their COMMIT returned were on "
        f"the new primary ({acked_local} more were acknowledged before a standby had them, as the manager "
        f"allows while it runs the primary without a synchronous standby, and need not survive a failover) "
        f"and no write rejected with TN002 was; the older tokens but a continued tenure's ({stale} checks in "
        f"all) got TN002 there; the automatic hold-off lease never had two leaders by the client rule.",
        "",
        "Errors clients saw, over all trials (client: the campaigners; probe: the poller of the new primary; "
        "conn: connection failures by cause):",
        "",
    ]
    for k in kinds:
        lines.append(f"- {k}: " + (", ".join(f"{key} {c}" for (kk, key), c in sorted(errs.items()) if kk == k)
                                   or "none"))
    return "\n".join(lines) + "\n"


def cleanup():
    stop.set()
    manager.cleanup()
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
        manager.build()
        create_objects()
        say(f"{manager.title} cluster up in {now() - t:.1f} s: n1 :{port['n1']}, n2 :{port['n2']}; "
            f"ttl {int(TTL * 1000)} ms; {manager.version()}")
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
