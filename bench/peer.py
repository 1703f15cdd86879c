#!/usr/bin/env python3
"""pg_tenure beside its peer: etcd's locks and leases, with Python clients.

    peer.py --bindir PG_BIN [--port 54335] [--etcd-port 23791] [--conf FILE]
            [--clients "1 8"] [--windows 15] [--seconds 1] [--mode thread]
            [--smoke] [--csv FILE] [--md FILE]

Run as an unprivileged user (bench/run.sh runs it as the user "tenure",
section peer), with pg_tenure installed in the PostgreSQL of PG_BIN and
Debian's etcd-server, python3-etcd3 and python3-psycopg.  Starts, in a new
temporary directory (both data directories on the same file system), a
throwaway cluster (initdb, the settings of FILE, which run.sh fills with
bench/lib.sh's bench_settings, then synchronous_commit = on, the default,
and track_wal_io_timing = on) and a one-member etcd (/usr/bin/etcd,
localhost ports, its defaults: every raft entry fsynced); stops both and
removes the directory at exit.

Operations, each client (a thread of this process, or a process of its own
with --mode process) with its own lease, lock or etcd lease, every call a
round trip:

  tenure_cycle_sync_on   SELECT tenure.acquire(lease, 'h'), then
                         SELECT tenure.release(lease, 'h'): non-session-bound,
                         psycopg 3, autocommit (each call its own
                         transaction), synchronous_commit = on
  tenure_cycle_sync_off  the same with synchronous_commit = off
  etcd_lock_cycle        python3-etcd3: client.lock(name, ttl=15).acquire(),
                         then .release() (a lease grant and a put
                         transaction, then a delete transaction; the library
                         leaves the lock's lease to expire after its ttl: the
                         client revokes those leases after the window, so that
                         etcd's work to revoke them lands in no later window
                         and is counted nowhere)
  tenure_renew           SELECT tenure.renew(lease, 'h') on a held lease
  etcd_keepalive         python3-etcd3: Lease.refresh() (one LeaseKeepAlive
                         request and response) on a granted lease

Windows: for each of WINDOWS rounds and each client count, every operation
runs SECONDS with that many clients, the operations taking turns (the order
reversed every other round, so that drift favours neither side).  A round
with short windows first warms both up and is not counted.  An operation
counts if it ends inside its window; a failed acquisition, release, renewal
or keep-alive stops the run.  Each pg_tenure operation is compared with its
etcd peer in the same round; the report gives per client count the median
over the rounds of ops/s and of that ratio, with the min..max range, and
what an operation cost: the clients' CPU, the serving processes' CPU and
time waiting for a CPU (/proc/PID/task/TID/schedstat of the clients'
backends, or of etcd), and the WAL flushes (pg_stat_wal; etcd's /metrics).

Clients are threads by default: on a machine of 2 cores, 8 client
processes cost more CPU per operation than 8 threads (separate
interpreters, grpc's pollers in each), CPU the servers then lack.  The
threads' Python work stays within a core but for etcd's keep-alive at 8
clients, which the GIL then holds below what processes reach
(bench/README.md has the measurement).

--smoke: 1 round of 1 s windows.  Writes one CSV row per window to --csv
and the report (markdown) to --md; progress goes to stdout.
"""
import argparse
import collections
import multiprocessing
import os
import queue
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request

import etcd3
import psycopg

LOCK_TTL = 15
RENEW_TTL = 86400
WARMUP_SECONDS = 0.5
START_MARGIN = 0.1
ETCD = "/usr/bin/etcd"

# the order of a round; even rounds run it backwards
ORDER = ["tenure_cycle_sync_on", "etcd_lock_cycle", "tenure_cycle_sync_off",
         "tenure_renew", "etcd_keepalive"]
# pg_tenure's operation | its etcd peer | how the report names them
PAIRS = [
    ("tenure_cycle_sync_on", "etcd_lock_cycle",
     "acquire + release, synchronous_commit on | lock acquire + release"),
    ("tenure_cycle_sync_off", "etcd_lock_cycle",
     "acquire + release, synchronous_commit off | lock acquire + release"),
    ("tenure_renew", "etcd_keepalive", "renew | lease keep-alive"),
]
SYNC = {"tenure_cycle_sync_on": "on", "tenure_cycle_sync_off": "off"}


class Client:
    """One client's connections and operations: a psycopg connection in
    autocommit and an etcd3 client, with its own lease names (index idx)."""

    def __init__(self, idx, conninfo, etcd_port):
        self.pg = psycopg.connect(conninfo, autocommit=True)
        self.cur = self.pg.cursor()
        self.backend = self.call("SELECT pg_backend_pid()", ())
        self.etcd = etcd3.client(host="127.0.0.1", port=etcd_port)
        self.cycle = "peer-cycle-%d" % idx
        self.renewed = "peer-renew-%d" % idx
        self.lock = self.etcd.lock(self.cycle, ttl=LOCK_TTL)
        # the leases the lock took in this window
        self.granted = []
        self.lease = self.etcd.lease(RENEW_TTL)
        self.steps = {
            "tenure_cycle_sync_on": self.tenure_cycle,
            "tenure_cycle_sync_off": self.tenure_cycle,
            "etcd_lock_cycle": self.etcd_cycle,
            "tenure_renew": self.tenure_renew,
            "etcd_keepalive": self.etcd_keepalive,
        }

    def call(self, sql, args):
        """Run one statement, return its single value."""
        self.cur.execute(sql, args)
        return self.cur.fetchone()[0]

    def tenure_cycle(self):
        if self.call("SELECT tenure.acquire(%s, 'h')", (self.cycle,)) is None:
            raise RuntimeError("tenure.acquire(%s) returned NULL" % self.cycle)
        if self.call("SELECT tenure.release(%s, 'h')", (self.cycle,)) is not True:
            raise RuntimeError("tenure.release(%s) returned false" % self.cycle)

    def etcd_cycle(self):
        if not self.lock.acquire(timeout=10):
            raise RuntimeError("etcd lock %s: acquire failed" % self.cycle)
        self.granted.append(self.lock.lease.id)
        if not self.lock.release():
            raise RuntimeError("etcd lock %s: release failed" % self.cycle)

    def tenure_renew(self):
        if self.call("SELECT tenure.renew(%s, 'h')", (self.renewed,)) is not True:
            raise RuntimeError("tenure.renew(%s) returned false" % self.renewed)

    def etcd_keepalive(self):
        answers = self.lease.refresh()
        if not answers or answers[0].TTL <= 0:
            raise RuntimeError("etcd lease %x: keep-alive failed" % self.lease.id)

    def window(self, op, start, seconds, cpu_clock):
        """Run op from start (time.monotonic) for seconds; return the
        operations that ended inside the window and the client CPU seconds
        they took (cpu_clock)."""
        step = self.steps[op]
        if op in SYNC:
            self.cur.execute("SELECT set_config('synchronous_commit', %s, false)", (SYNC[op],))
        deadline = start + seconds
        while time.monotonic() < start:
            time.sleep(min(0.01, max(0.0, start - time.monotonic())))
        n = 0
        cpu0 = cpu_clock()
        while time.monotonic() < deadline:
            step()
            if time.monotonic() <= deadline:
                n += 1
        cpu = cpu_clock() - cpu0
        # this backend's WAL counters to pg_stat_wal now, not within a second
        self.cur.execute("SELECT pg_stat_force_next_flush()")
        self.revoke_granted()
        return n, cpu

    def revoke_granted(self):
        """Revoke the leases the lock left to expire, all at once, so that
        etcd's work to revoke them lands in no later window."""
        stub = self.etcd.leasestub
        pending = [stub.LeaseRevoke.future(etcd3.etcdrpc.LeaseRevokeRequest(ID=i), 30) for i in self.granted]
        for f in pending:
            f.result()
        self.granted = []

    def close(self):
        self.pg.close()
        self.etcd.close()


def client_main(idx, conninfo, etcd_port, commands, results, threaded):
    """A client's loop: connect, say ready, run each (op, start, seconds)
    command, until None.  Every failure is reported, with its traceback."""
    client = None
    # a client process's CPU, grpc's threads included; the pool measures
    # the clients that are threads, together
    cpu_clock = (lambda: 0.0) if threaded else time.process_time
    try:
        client = Client(idx, conninfo, etcd_port)
        results.put((idx, "ready", client.backend))
        for op, start, seconds in iter(commands.get, None):
            results.put((idx, "done", client.window(op, start, seconds, cpu_clock)))
    except Exception:
        results.put((idx, "error", traceback.format_exc()))
    finally:
        if client is not None:
            client.close()


class Pool:
    """N clients, processes or threads, each with its command queue."""

    def __init__(self, n, conninfo, etcd_port, mode):
        self.threaded = mode == "thread"
        if self.threaded:
            self.results = queue.Queue()
            self.commands = [queue.Queue() for _ in range(n)]
            spawn = threading.Thread
        else:
            # spawned, not forked: grpc does not survive a fork
            ctx = multiprocessing.get_context("spawn")
            self.results = ctx.Queue()
            self.commands = [ctx.Queue() for _ in range(n)]
            spawn = ctx.Process
        self.workers = [spawn(target=client_main, daemon=True,
                              args=(i, conninfo, etcd_port, self.commands[i], self.results, self.threaded))
                        for i in range(n)]
        for w in self.workers:
            w.start()
        # each client's backend, by client index
        self.backends = self.collect(n, "ready")

    def collect(self, n, kind):
        """The n answers of kind, by client index; any error stops the run."""
        got = {}
        while len(got) < n:
            idx, what, value = self.results.get(timeout=300)
            if what == "error":
                raise RuntimeError("client %d failed:\n%s" % (idx, value))
            assert what == kind, (what, kind)
            got[idx] = value
        return got

    def start(self, op, clients, seconds):
        """Have the first `clients` clients run op for seconds from a
        moment just ahead; return that moment (time.monotonic)."""
        start = time.monotonic() + START_MARGIN
        for i in range(clients):
            self.commands[i].put((op, start, seconds))
        return start

    def finish(self, clients):
        """The clients' operations in the window started last, and their
        CPU seconds (client processes measure their own; 0 for threads)."""
        got = self.collect(clients, "done").values()
        return sum(n for n, _ in got), sum(c for _, c in got)

    def window(self, op, clients, seconds):
        """op with the first `clients` clients for seconds, unmeasured."""
        self.start(op, clients, seconds)
        return self.finish(clients)

    def stop(self):
        for q in self.commands:
            q.put(None)
        for w in self.workers:
            w.join(timeout=30)


def run(cmd, **kw):
    """Run a command, its output to the caller's; raise if it fails."""
    return subprocess.run(cmd, check=True, **kw)


class Servers:
    """The throwaway cluster and etcd, in a new temporary directory."""

    def __init__(self, args):
        self.args = args
        self.dir = tempfile.mkdtemp(prefix="pg_tenure-peer.")
        self.data = os.path.join(self.dir, "data")
        self.pg_started = False
        self.etcd = None
        self.conninfo = "host=%s port=%d dbname=postgres" % (self.dir, args.port)

    def pg_bin(self, name):
        return os.path.join(self.args.bindir, name)

    def start_pg(self, max_clients):
        run([self.pg_bin("initdb"), "-D", self.data, "-A", "trust"], stdout=subprocess.DEVNULL)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as conf:
            conf.write("port = %d\nlisten_addresses = ''\nunix_socket_directories = '%s'\n"
                       % (self.args.port, self.dir))
            if self.args.conf:
                with open(self.args.conf) as extra:
                    conf.write(extra.read())
            else:
                conf.write("shared_preload_libraries = 'pg_tenure'\n")
            conf.write("# peer.py: the default, each window sets its own; flush times for pg_stat_wal\n"
                       "synchronous_commit = on\ntrack_wal_io_timing = on\n")
        run([self.pg_bin("pg_ctl"), "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w", "start"],
            stdout=subprocess.DEVNULL)
        self.pg_started = True
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            self.wait_keeper(conn)
            conn.execute("CREATE EXTENSION pg_tenure")
            conn.execute("""SELECT tenure.create_lease('peer-cycle-' || i, %s, holdoff => '0'),
                                   tenure.create_lease('peer-renew-' || i, %s, holdoff => '0')
                            FROM generate_series(0, %s) i""",
                         ("%d s" % LOCK_TTL, "%d s" % RENEW_TTL, max_clients - 1))
            conn.execute("SELECT tenure.acquire('peer-renew-' || i, 'h') FROM generate_series(0, %s) i",
                         (max_clients - 1,))
            self.pg_version = conn.execute("SELECT version()").fetchone()[0]
        self.stats = psycopg.connect(self.conninfo, autocommit=True)

    def server_pids(self, op, backends):
        """The processes that serve op: the clients' backends, or etcd."""
        return backends if op.startswith("tenure") else [self.etcd.pid]

    def flushes(self, op):
        """Flushes so far and their milliseconds: pg_stat_wal's for a
        pg_tenure operation, etcd's WAL fsyncs (its /metrics) for etcd's."""
        if op.startswith("tenure"):
            return self.stats.execute("SELECT wal_sync, wal_sync_time FROM pg_stat_wal").fetchone()
        url = "http://127.0.0.1:%d/metrics" % self.args.etcd_port
        got = {}
        with urllib.request.urlopen(url, timeout=10) as metrics:
            for line in metrics.read().decode().splitlines():
                name, _, value = line.partition(" ")
                if name.startswith("etcd_disk_wal_fsync_duration_seconds_"):
                    got[name.rsplit("_", 1)[1]] = float(value)
        return got["count"], got["sum"] * 1000

    @staticmethod
    def wait_keeper(conn):
        for _ in range(300):
            if conn.execute("SELECT count(*) FROM pg_stat_activity "
                            "WHERE backend_type = 'pg_tenure keeper'").fetchone()[0] == 1:
                return
            time.sleep(0.1)
        raise RuntimeError("the pg_tenure keeper did not start")

    def start_etcd(self):
        client = "http://127.0.0.1:%d" % self.args.etcd_port
        peer = "http://127.0.0.1:%d" % (self.args.etcd_port + 1)
        self.etcd_argv = [ETCD, "--name", "peer", "--data-dir", os.path.join(self.dir, "etcd"),
                          "--listen-client-urls", client, "--advertise-client-urls", client,
                          "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                          "--initial-cluster", "peer=" + peer, "--initial-cluster-state", "new"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        with open(os.path.join(self.dir, "etcd.log"), "w") as log:
            self.etcd = subprocess.Popen(self.etcd_argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        probe = etcd3.client(host="127.0.0.1", port=self.args.etcd_port, timeout=1)
        try:
            for _ in range(300):
                if self.etcd.poll() is not None:
                    break
                try:
                    self.etcd_version = probe.status().version
                    return
                except Exception:
                    time.sleep(0.1)
        finally:
            probe.close()
        with open(os.path.join(self.dir, "etcd.log")) as log:
            sys.stderr.write(log.read()[-4000:])
        raise RuntimeError("etcd did not start")

    def stop(self):
        if getattr(self, "stats", None) is not None:
            self.stats.close()
        if self.etcd is not None:
            self.etcd.terminate()
            try:
                self.etcd.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.etcd.kill()
                self.etcd.wait()
        if self.pg_started:
            subprocess.run([self.pg_bin("pg_ctl"), "-D", self.data, "-m", "fast", "stop"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


Row = collections.namedtuple("Row", "clients round op operations seconds per_second cpu_us server_cpu_us wait_us "
                                   "flushes flush_ms load")


def schedstat(pids):
    """Nanoseconds on a CPU and waiting for one (/proc/PID/schedstat), summed
    over the threads of pids."""
    run = wait = 0
    for pid in pids:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, task)) as f:
                fields = f.read().split()
            run += int(fields[0])
            wait += int(fields[1])
    return run, wait


def pause_until(moment):
    time.sleep(max(0.0, moment - time.monotonic()))


def window(pool, servers, op, clients, r, seconds):
    """One measured window: its Row, with the clients' CPU, the serving
    processes' CPU and wait for a CPU, and the flushes, per operation.
    What can be read at once is read at the window's start and end, so that
    the clients' work after it (revoking leases) is left out; a backend
    reports its WAL counters when the client asks, after the window."""
    pids = servers.server_pids(op, [pool.backends[i] for i in range(clients)])
    pg = op.startswith("tenure")
    f0 = servers.flushes(op) if pg else None
    start = pool.start(op, clients, seconds)
    pause_until(start)
    e0 = None if pg else servers.flushes(op)
    s0, c0 = schedstat(pids), time.process_time()
    pause_until(start + seconds)
    c1, s1 = time.process_time(), schedstat(pids)
    e1 = None if pg else servers.flushes(op)
    n, cpu = pool.finish(clients)
    f0, f1 = (f0, servers.flushes(op)) if pg else (e0, e1)
    if pool.threaded:
        cpu = c1 - c0
    if n == 0:
        raise RuntimeError("%s with %d clients: no operation in %s s" % (op, clients, seconds))
    return Row(clients, r, op, n, seconds, n / seconds, cpu * 1e6 / n, (s1[0] - s0[0]) / 1e3 / n,
               (s1[1] - s0[1]) / 1e3 / n, (f1[0] - f0[0]) / n, (f1[1] - f0[1]) / n, os.getloadavg()[0])


def measure(pool, servers, args, csv):
    """The warm-up round, then args.windows rounds: every window's Row,
    each also written to csv."""
    rows = []
    for c in args.clients:
        for op in ORDER:
            pool.window(op, c, min(WARMUP_SECONDS, args.seconds))
    csv.write("clients,round,op,operations,seconds,per_second,client_cpu_us_per_op,server_cpu_us_per_op,"
              "server_cpu_wait_us_per_op,flushes_per_op,flush_ms_per_op,load_average\n")
    for r in range(1, args.windows + 1):
        for c in args.clients:
            for op in (ORDER if r % 2 else ORDER[::-1]):
                row = window(pool, servers, op, c, r, args.seconds)
                rows.append(row)
                csv.write("%d,%d,%s,%d,%g,%.1f,%.1f,%.1f,%.1f,%.3f,%.4f,%.2f\n" % row)
                csv.flush()
                print("  round %d, %d clients: %-22s %8.1f ops/s" % (r, c, op, row.per_second), flush=True)
    return rows


def spread(values, fmt, bold=""):
    """median (min..max) of values, each formatted by fmt; bold="**"
    emphasizes the median"""
    return (bold + fmt + bold + " (" + fmt + ".." + fmt + ")") % (
        statistics.median(values), min(values), max(values))


def costs(rows, c, op):
    """The medians over the rounds of op's costs per operation at c clients:
    client CPU, server CPU and wait for a CPU (us), flushes (with the mean
    time of one), as strings."""
    mine = [x for x in rows if x.clients == c and x.op == op]
    med = {f: statistics.median(getattr(x, f) for x in mine) for f in ("cpu_us", "server_cpu_us", "wait_us",
                                                                        "flushes", "flush_ms")}
    fl = med["flushes"]
    return ["%.0f" % med["cpu_us"], "%.0f" % med["server_cpu_us"], "%.0f" % med["wait_us"],
            "%.2f (%.2f ms)" % (fl, med["flush_ms"] / fl) if fl >= 0.01 else "%.2f" % fl]


def report(rows, args, servers, elapsed):
    """The markdown part: per comparison and client count, the rates and
    their ratio, then the costs per operation."""
    out = []
    w = out.append
    w("## Against etcd: acquire + release and renew, Python clients")
    w("")
    w("`%s` (`peer.csv`, %d min %d s): pg_tenure and etcd %s on this machine, their data directories"
      % (command(args), elapsed // 60, elapsed % 60, servers.etcd_version))
    w("on the same file system; every client %s, with its own lease, lock or etcd lease."
      % ("a thread of one process" if args.mode == "thread" else "a process of its own"))
    w("%d round%s; in each, every operation runs %g s per client count, the operations taking turns (the order"
      % (args.windows, "" if args.windows == 1 else "s", args.seconds))
    w("reversed every other round). Median of the rounds (min..max); ratio: pg_tenure / etcd in the same round.")
    w("Load average (1 min) over the windows: %.1f..%.1f on %d cores (anything else running here shares them)."
      % (min(x.load for x in rows), max(x.load for x in rows), os.cpu_count()))
    w("")
    w("| pg_tenure | etcd | clients | pg_tenure ops/s | etcd ops/s | ratio |")
    w("| --- | --- | ---: | ---: | ---: | ---: |")
    rate = {(x.clients, x.round, x.op): x.per_second for x in rows}
    for a, b, names in PAIRS:
        for c in args.clients:
            ra = [rate[(c, r, a)] for r in range(1, args.windows + 1)]
            rb = [rate[(c, r, b)] for r in range(1, args.windows + 1)]
            w("| %s | %d | %s | %s | %s |" % (names, c, spread(ra, "%.0f"), spread(rb, "%.0f"),
                                                spread([x / y for x, y in zip(ra, rb)], "%.2f", "**")))
    w("")
    w("Per operation, pg_tenure / etcd, medians of the rounds:")
    w("")
    w("| pg_tenure | etcd | clients | client CPU us | server CPU us | server waiting for a CPU us | flushes (one) |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for a, b, names in PAIRS:
        for c in args.clients:
            w("| %s | %d | %s |" % (names, c, " | ".join(x + " / " + y for x, y in zip(costs(rows, c, a),
                                                                                       costs(rows, c, b)))))
    w("")
    w("- pg_tenure: %s; %s; psycopg %s, autocommit, non-session-bound"
      % (servers.pg_version.split(" on ")[0], settings_line(args), psycopg.__version__))
    w("  `tenure.acquire(lease, 'h')` then `tenure.release(lease, 'h')` (lease ttl %d s, holdoff 0), and"
      % LOCK_TTL)
    w("  `tenure.renew(lease, 'h')` on a held lease; `synchronous_commit` set per window.")
    w("- etcd: Debian's etcd-server, one member, `%s` with localhost URLs and the defaults (fsync on);"
      % os.path.basename(ETCD))
    w("  python3-etcd3 %s (grpcio): `client.lock(name, ttl=%d).acquire()` then `.release()` (a lease grant and a"
      % (etcd3.__version__, LOCK_TTL))
    w("  put transaction, then a delete transaction; the library leaves each lock's lease to expire after its ttl:")
    w("  the clients revoke those leases after the window, so that etcd's work to revoke them, a raft entry each, lands")
    w("  in no later window and is counted nowhere), and `Lease.refresh()` (a keep-alive round trip).")
    w("- client CPU: the clients' CPU time (Python, psycopg or grpc)%s."
      % (", of the process whose threads they are" if args.mode == "thread" else ""))
    w("- server CPU, and waiting for a CPU: the clients' backends' or etcd's threads' time on a CPU and runnable")
    w("  but waiting for one (`/proc/PID/task/TID/schedstat`); with %d cores shared, the wait is what other work costs."
      % os.cpu_count())
    w("- flushes: WAL flushes per operation (the mean time of one, waiting for a CPU after it included):")
    w("  `pg_stat_wal`'s wal_sync and wal_sync_time (`track_wal_io_timing = on`; the WAL writer's flushes under")
    w("  synchronous_commit = off count within a second), etcd's `etcd_disk_wal_fsync_duration_seconds` (`/metrics`).")
    w("")
    return "\n".join(out) + "\n"


def settings_line(args):
    """the cluster's settings, on one line"""
    lines = []
    if args.conf:
        with open(args.conf) as f:
            lines = [ln.strip() for ln in f if "=" in ln and not ln.lstrip().startswith("#")]
    lines = [ln.replace(" = ", "=").replace("'", "") for ln in lines
             if not ln.startswith(("shared_preload_libraries", "synchronous_commit"))]
    return "settings " + ", ".join(lines + ["synchronous_commit=on", "track_wal_io_timing=on"])


def command(args):
    """the command that reproduces the run (PG_BIN: the bin directory)"""
    return "python3 bench/peer.py --bindir $PG_BIN --clients %s --windows %d --seconds %g --mode %s" % (
        shlex.quote(" ".join(map(str, args.clients))), args.windows, args.seconds, args.mode)


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bindir", required=True, help="PostgreSQL bin directory, pg_tenure installed")
    p.add_argument("--port", type=int, default=54335)
    p.add_argument("--etcd-port", type=int, default=23791, help="client port; the peer port is the next")
    p.add_argument("--conf", help="settings appended to postgresql.conf (bench_settings)")
    p.add_argument("--clients", default="1 8", type=lambda s: [int(x) for x in s.split()])
    p.add_argument("--windows", type=int, help="rounds of windows (15; --smoke: 1)")
    p.add_argument("--seconds", type=float, help="seconds per window (1; --smoke: 1)")
    p.add_argument("--mode", choices=["process", "thread"], default="thread", help="what a client is")
    p.add_argument("--smoke", action="store_true", help="1 round of 1 s windows")
    p.add_argument("--csv", default="peer.csv")
    p.add_argument("--md", default="peer.md")
    args = p.parse_args()
    if args.windows is None:
        args.windows = 1 if args.smoke else 15
    if args.seconds is None:
        args.seconds = 1
    return args


def main():
    args = parse()
    if os.geteuid() == 0:
        sys.exit("peer.py: run as an unprivileged user (initdb refuses root); bench/run.sh runs it as tenure")
    # SIGTERM ends the run through the finally below, which stops the servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    t0 = time.monotonic()
    servers = Servers(args)
    pool = None
    try:
        servers.start_pg(max(args.clients))
        servers.start_etcd()
        print("peer: %s and etcd %s, %d rounds of %g s windows, clients %s, %ss"
              % (servers.pg_version.split(" on ")[0], servers.etcd_version, args.windows, args.seconds,
                 args.clients, args.mode), flush=True)
        pool = Pool(max(args.clients), servers.conninfo, args.etcd_port, args.mode)
        with open(args.csv, "w") as csv:
            rows = measure(pool, servers, args, csv)
        with open(args.md, "w") as md:
            md.write(report(rows, args, servers, int(time.monotonic() - t0)))
    finally:
        if pool is not None:
            pool.stop()
        servers.stop()


if __name__ == "__main__":
    main()
