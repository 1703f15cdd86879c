"""pg_tenure's randomized stress test: clients, faults, and an offline check.

    test/stress/run [--seconds N | --minutes N] [--seed S] [--clients N]
                    [--standby] [--tight] [--async] [--pg-config PATH]
                    [--plant NAME]
                    [--keep]

Creates a throwaway cluster (initdb; pg_tenure preloaded with the settings
of test/tenure.conf, plus track_commit_timestamp and a crash restart),
starts N client processes (client.py) that call pg_tenure at random and
write fenced tables, and meanwhile injects faults: pg_terminate_backend of
client backends and of the sessions of session-bound holders, SIGTERM and
SIGKILL of the keeper worker (SIGKILL makes the postmaster restart the
whole cluster), SIGSTOP of a client past its leases' ttl (preferably one
paused before its COMMIT) and SIGCONT, an immediate shutdown and start,
and with --standby the promotion of a streaming standby after an
immediate shutdown of the primary.  --tight runs 20 leases on 16 lease
slots with a history of 3 rows per lease; --async runs with
synchronous_commit = off.  At the end it saves the
database's fenced rows and issued epochs, and runs check.py over the run
directory.  Exit status 0 if no violation was found, 1 otherwise (the
seed and the command to rerun are printed), 2 on a setup error.

The issued epochs and releases, with their commit timestamps, are read
from the WAL by logical decoding (record.py), so that nothing of the
stress's own sits on pg_tenure's tables: pg_tenure writes them by direct
access, as in production.  With --standby they are recorded by triggers
on tenure.history instead (a logical slot does not survive the
promotion), and pg_tenure writes that table by SQL statements: that run
stresses the statements' way.

--plant NAME builds a copy of pg_tenure with a planted bug
(test/stress/plants/NAME.patch) into a private copy of the PostgreSQL
installation and runs the stress against it: the run is expected to find
a violation, and the exit status is 0 only if it did.

The seed fixes every random choice (the workload of each client, the
faults and their times); the interleaving still follows the scheduler, so
a rerun with the same seed repeats the run's shape, not its every step.
"""
import argparse
import collections
import glob
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import psycopg

import check
import client
import record
from cluster import ClusterError, Server, poll

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))

# (ttl seconds, holdoff: None = automatic) of leases l0, l1, ...; more
# leases (--tight) repeat the pattern
LEASE_KINDS = [(1.5, None), (1.0, None), (1.0, 0.0), (2.0, 0.0)]
LEASES = {}
# --tight: more leases than tenure.max_leases (at least 16) has slots, so
# that slots are taken over and leases loaded again, and a short history
TIGHT_LEASES = 20
TIGHT_CONF = """
tenure.max_leases = 16
tenure.role_share = 100
tenure.database_share = 100
tenure.history_per_lease = 3
"""


def set_leases(n):
    LEASES.clear()
    for i in range(n):
        LEASES[f"l{i}"] = LEASE_KINDS[i % len(LEASE_KINDS)]

# fault: weight
FAULTS = {
    "terminate_backend": 20,
    "terminate_holder": 20,
    "keeper_sigterm": 12,
    "client_stop": 28,
    "keeper_sigkill": 6,
    "restart_immediate": 6,
}
MAX_CRASHES = 4     # SIGKILLs of the keeper plus immediate restarts per minute


def parse_args(argv):
    p = argparse.ArgumentParser(prog="test/stress/run",
                                description="pg_tenure randomized stress with an offline checker")
    p.add_argument("--seconds", type=float, default=None,
                   help="workload duration (default 60; 120 with --standby)")
    p.add_argument("--minutes", type=float, default=None, help="workload duration, for soaks")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--standby", action="store_true",
                   help="also run a streaming standby and promote it halfway")
    p.add_argument("--pg-config", default=os.environ.get(
        "PG_CONFIG", "/usr/lib/postgresql/15/bin/pg_config"))
    p.add_argument("--plant", default=None,
                   help="run against a build with this planted bug; expect a violation")
    p.add_argument("--tight", action="store_true",
                   help=f"{TIGHT_LEASES} leases on 16 lease slots, 3 history rows per lease")
    p.add_argument("--async", dest="async_commit", action="store_true",
                   help="synchronous_commit = off: crashes lose acknowledged commits")
    p.add_argument("--keep", action="store_true", help="keep the run directory")
    a = p.parse_args(argv)
    if a.minutes is not None:
        a.duration = a.minutes * 60
    elif a.seconds is not None:
        a.duration = a.seconds
    else:
        a.duration = 120.0 if a.standby else 60.0
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "big")
    return a


def say(msg):
    print(f"[stress {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def server_conf(sockdir, tight, async_commit=False):
    with open(os.path.join(TOP, "test", "tenure.conf")) as f:
        conf = f.read()
    return conf + f"""
# stress test
track_commit_timestamp = on
restart_after_crash = on
listen_addresses = ''
unix_socket_directories = '{sockdir}'
log_line_prefix = '%m [%p] %b '
max_connections = 60
wal_level = logical
max_wal_senders = 4
wal_keep_size = '256MB'
hot_standby = on
""" + (TIGHT_CONF if tight else "") + ("synchronous_commit = off\n" if async_commit else "")


SETUP_SQL = """
CREATE EXTENSION pg_tenure;
CREATE SCHEMA stress;
"""

# --standby: the issues and releases recorded by triggers (see record.py)
TRIGGER_SQL = """
-- every epoch issued, written by the issuing transaction itself: the
-- commit timestamp of this row's xmin is the epoch's issue (tenure.history
-- rows are updated when a tenure ends, which replaces their xmin)
CREATE TABLE stress.issued (lease text NOT NULL, epoch bigint NOT NULL,
                            holder text NOT NULL);
CREATE FUNCTION stress.note_issue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO stress.issued VALUES (NEW.lease, NEW.epoch, NEW.holder);
    RETURN NULL;
END $$;
CREATE TRIGGER note_issue AFTER INSERT ON tenure.history
    FOR EACH ROW EXECUTE FUNCTION stress.note_issue();
-- every release, written by the releasing transaction (for a note: the
-- README promises no order between a release and fenced commits)
CREATE TABLE stress.released (lease text NOT NULL, epoch bigint NOT NULL);
CREATE FUNCTION stress.note_release() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO stress.released VALUES (NEW.lease, NEW.epoch);
    RETURN NULL;
END $$;
CREATE TRIGGER note_release AFTER UPDATE ON tenure.history
    FOR EACH ROW WHEN (NEW.end_reason = 'released' AND OLD.end_reason IS NULL)
    EXECUTE FUNCTION stress.note_release();
"""


def setup_database(srv, recorder):
    """pg_tenure, the leases and their fenced tables; the slot that
    recorder reads (before the first epoch), or the triggers if None."""
    with srv.connect() as c:
        c.execute(SETUP_SQL)
        if recorder is not None:
            recorder.create(srv)
        else:
            c.execute(TRIGGER_SQL)
        for name, (ttl, holdoff) in LEASES.items():
            c.execute("SELECT tenure.create_lease(%s, ttl => %s::interval, holdoff => %s::interval)",
                      [name, f"{ttl} s", None if holdoff is None else f"{holdoff} s"])
            c.execute(f"CREATE TABLE stress.w_{name} (writer text NOT NULL, epoch bigint NOT NULL,"
                      f" row text PRIMARY KEY)")
            c.execute("SELECT tenure.fence_table(%s, %s)", [f"stress.w_{name}", name])


class Injector:
    """The fault injector, run by the main process."""

    def __init__(self, args, run_dir, primary, standby, procs, phase, rnd,
                 recorder=None):
        self.args = args
        self.recorder = recorder
        self.drained = time.monotonic()
        self.primary = primary      # the server that takes writes now
        self.standby = standby
        self.procs = procs
        self.phase = phase
        self.rnd = rnd
        self.crashes = 0
        self.promoted = False
        self.log = open(os.path.join(run_dir, "faults.jsonl"), "w", buffering=1)

    def emit(self, kind, **kw):
        rec = {"fault": kind, "t": time.monotonic(), **kw}
        self.log.write(json.dumps(rec) + "\n")
        return rec

    def sql(self, query, params=None, quiet=False):
        try:
            return self.primary.sql(query, params)
        except psycopg.Error as e:
            if not quiet:
                self.emit("injector_sql_error", msg=str(e)[:200])
            return None

    def keeper_pid(self):
        rows = self.sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_tenure keeper'",
                        quiet=True)
        return rows[0][0] if rows else None

    def wait_keeper(self, not_pid=None):
        """Wait until a keeper (other than not_pid) runs."""
        try:
            poll("the keeper", lambda: self.keeper_pid() not in (None, not_pid), timeout=60)
        except ClusterError as e:
            self.emit("harness_error", msg=str(e))

    def terminate_backend(self):
        rows = self.sql("SELECT pid, application_name FROM pg_stat_activity"
                        " WHERE application_name LIKE 'stress-%' ORDER BY pid")
        if not rows:
            return
        pid, app = self.rnd.choice(rows)
        res = self.sql("SELECT pg_terminate_backend(%s)", [pid])
        self.emit("terminate_backend", pid=pid, app=app, res=res and res[0][0])

    def terminate_holder(self):
        """End a session-bound tenure by its session: the holder does not
        know, and must stop believing by the client rule alone."""
        rows = self.sql("SELECT lease, holder, holder_pid FROM tenure.leases"
                        " WHERE holder IS NOT NULL AND session_bound ORDER BY lease")
        if not rows:
            return self.terminate_backend()
        lease, holder, pid = self.rnd.choice(rows)
        res = self.sql("SELECT pg_terminate_backend(%s)", [pid])
        self.emit("terminate_holder", lease=lease, holder=holder, pid=pid, res=res and res[0][0])

    def keeper_signal(self, sig, kind):
        pid = self.keeper_pid()
        if pid is None:
            return
        self.emit(kind, pid=pid)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            self.emit(kind + "_missed", pid=pid)
            return
        # a new keeper: after SIGKILL, once the postmaster has restarted
        # the whole cluster
        self.wait_keeper(not_pid=pid)
        if sig == signal.SIGKILL:
            self.crashes += 1
            self.wait_primary()
            self.emit("ready")

    def client_stop(self):
        paused = [i for i in range(len(self.procs)) if self.phase[i] == 1]
        if paused and self.rnd.random() < 0.7:
            i = self.rnd.choice(paused)
        else:
            i = self.rnd.randrange(len(self.procs))
        pid = self.procs[i].pid
        length = max(t for t, _ in LEASES.values()) + self.rnd.uniform(0.2, 1.0)
        self.emit("client_stop", client=i, pid=pid, in_commit=bool(self.phase[i]),
                  length=round(length, 3))
        os.kill(pid, signal.SIGSTOP)
        time.sleep(length)      # the fault's length, not a wait for an outcome
        os.kill(pid, signal.SIGCONT)
        self.emit("client_cont", client=i, pid=pid)

    def wait_primary(self):
        try:
            self.primary.wait_ready(writable=True)
        except ClusterError as e:
            self.emit("harness_error", msg=str(e))

    def restart_immediate(self):
        self.crashes += 1
        self.emit("restart_immediate", postmaster=self.primary.postmaster_pid())
        self.primary.stop("immediate", check=False)
        self.emit("stopped")
        self.primary.start()
        self.emit("ready")
        self.wait_keeper()

    def promote(self):
        old = self.primary
        self.emit("promote_begin", old=old.name, new=self.standby.name)
        old.stop("immediate", check=False)
        self.emit("stopped", server=old.name)
        self.standby.promote()
        self.primary, self.standby = self.standby, None
        self.promoted = True
        self.emit("promoted", server=self.primary.name)
        self.wait_keeper()

    def drain(self):
        """Read the slot every few seconds, so that it holds back little
        WAL; a failed read (the server restarting) is tried again later."""
        if self.recorder is None or time.monotonic() - self.drained < 5:
            return
        if self.recorder.drain(self.primary):
            self.drained = time.monotonic()

    def run(self, start, end):
        promote_at = start + (end - start) / 2 if self.standby else None
        per_minute = MAX_CRASHES * max(1.0, (end - start) / 60)
        # every run has at least one crash restart and one immediate restart,
        # by 30% and 60% of its length if chance did not bring them earlier
        forced = [(start + 0.3 * (end - start), "keeper_sigkill"),
                  (start + 0.6 * (end - start), "restart_immediate")]
        done = collections.Counter()
        while True:
            now = time.monotonic()
            if now >= end:
                return
            # pacing between faults
            time.sleep(min(self.rnd.uniform(0.4, 1.6), max(0.0, end - now)))
            if time.monotonic() >= end:
                return
            if promote_at is not None and not self.promoted and time.monotonic() >= promote_at:
                self.promote()
                continue
            names, weights = zip(*FAULTS.items())
            kind = self.rnd.choices(names, weights)[0]
            if kind in ("keeper_sigkill", "restart_immediate"):
                if self.crashes >= per_minute or time.monotonic() - start < 5:
                    kind = "terminate_backend"
            for at, k in forced:
                if time.monotonic() >= at and not done[k]:
                    kind = k
                    break
            done[kind] += 1
            self.drain()
            if kind == "terminate_backend":
                self.terminate_backend()
            elif kind == "terminate_holder":
                self.terminate_holder()
            elif kind == "keeper_sigterm":
                self.keeper_signal(signal.SIGTERM, kind)
            elif kind == "keeper_sigkill":
                self.keeper_signal(signal.SIGKILL, kind)
            elif kind == "client_stop":
                self.client_stop()
            elif kind == "restart_immediate":
                self.restart_immediate()


def dump_database(srv, path, recorder):
    """The fenced rows with their commit times, and every issued epoch with
    the commit time of its issue (microseconds since 1970, server clock):
    from recorder, or the triggers' tables if None."""
    out = {"rows": {}, "issued": [], "released": [], "history": []}
    if recorder is not None:
        if not recorder.drain(srv):
            raise ClusterError("could not read the logical slot at the end of the run")
        out["issued"] = list(recorder.issued.values())
        out["released"] = list(recorder.released.values())
    with srv.connect() as c:
        for name in LEASES:
            out["rows"][name] = [
                list(r) for r in c.execute(
                    f"SELECT writer, epoch, row,"
                    f" (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint"
                    f" FROM stress.w_{name}")]
        if recorder is None:
            out["issued"] = [list(r) for r in c.execute(
                "SELECT lease, epoch, holder,"
                " (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint"
                " FROM stress.issued")]
            out["released"] = [list(r) for r in c.execute(
                "SELECT lease, epoch,"
                " (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint"
                " FROM stress.released")]
        out["history"] = [list(r) for r in c.execute(
            "SELECT lease, epoch, holder, session_bound, started::text, ended::text,"
            " end_reason FROM tenure.history ORDER BY lease, epoch")]
    with open(path, "w") as f:
        json.dump(out, f)


def print_server_lines(run_dir, limit=40):
    """The server log lines of the postmaster, the keeper and the startup
    process (crashes, restarts, promotion), and any PANIC or TRAP."""
    pat = re.compile(r"\] (postmaster|pg_tenure keeper|startup) |PANIC|TRAP:")
    for p in sorted(glob.glob(os.path.join(run_dir, "server-*.log"))):
        with open(p, errors="replace") as f:
            lines = [l.rstrip() for l in f if pat.search(l)]
        print(f"--- {os.path.basename(p)}: {len(lines)} lines of the postmaster, keeper and"
              f" startup process{', the last ' + str(limit) if len(lines) > limit else ''}:")
        print("\n".join(lines[-limit:]))


def bindir_of(pg_config):
    return subprocess.run([pg_config, "--bindir"], check=True, stdout=subprocess.PIPE,
                          text=True).stdout.strip()


def main(argv):
    args = parse_args(argv)
    if os.geteuid() == 0:
        print("test/stress/run: run as an unprivileged user (PostgreSQL refuses root),"
              " e.g. runuser -u tenure -- test/stress/run", file=sys.stderr)
        return 2
    rerun = f"test/stress/run --seconds {args.duration:g} --seed {args.seed}" + \
        (" --standby" if args.standby else "") + (" --tight" if args.tight else "") + \
        (" --async" if args.async_commit else "") + (f" --plant {args.plant}" if args.plant else "")
    say(f"seed {args.seed}; {args.duration:g} s, {args.clients} clients"
        + (", standby" if args.standby else "") + (f", planted bug {args.plant}" if args.plant else ""))
    set_leases(TIGHT_LEASES if args.tight else len(LEASE_KINDS))
    t0 = time.monotonic()
    root = tempfile.mkdtemp(prefix="pg_tenure-stress.")
    run_dir = os.path.join(root, "run")
    os.makedirs(os.path.join(run_dir, "clients"))
    servers = []
    procs = []
    ok = False
    try:
        pg_config = args.pg_config
        if args.plant:
            import plant
            pg_config = plant.build(args.plant, root, args.pg_config, say)
        bindir = bindir_of(pg_config)
        sockdir = os.path.join(root, "sock")
        os.mkdir(sockdir)
        port = 5432 + random.Random(args.seed).randrange(1000) * 2
        primary = Server("primary", bindir, root, sockdir, port)
        servers.append(primary)
        primary.initdb(server_conf(sockdir, args.tight, args.async_commit))
        primary.start()
        recorder = None if args.standby else record.Recorder()
        setup_database(primary, recorder)
        standby = None
        conninfo = primary.conninfo()
        if args.standby:
            standby = Server("standby", bindir, root, sockdir, port + 1)
            servers.append(standby)
            primary.base_backup_to(standby)
            standby.start()
            conninfo = (f"host={sockdir},{sockdir} port={port},{port + 1} dbname=postgres"
                        f" connect_timeout=5 target_session_attrs=read-write")
        meta = {"seed": args.seed, "duration": args.duration, "clients": args.clients,
                "leases": {n: {"ttl": t, "holdoff": h} for n, (t, h) in LEASES.items()},
                "standby": args.standby, "plant": args.plant, "tight": args.tight,
                "async": args.async_commit,
                "recorded_by": "triggers" if recorder is None else "logical decoding"}
        cfg = {"seed": args.seed, "dir": run_dir, "conninfo": conninfo,
               "lease_names": list(LEASES), "ttl": {n: t for n, (t, h) in LEASES.items()}}

        ctx = multiprocessing.get_context("fork")
        stop = ctx.Event()
        phase = ctx.Array("i", args.clients, lock=False)
        for i in range(args.clients):
            p = ctx.Process(target=client.main, args=(i, cfg, stop, phase), name=f"c{i}")
            p.start()
            procs.append(p)
        start = time.monotonic()
        meta["start"] = start
        inj = Injector(args, run_dir, primary, standby, procs, phase,
                       random.Random(args.seed * 7919 + 1), recorder)
        say(f"workload running in {root}")
        try:
            inj.run(start, start + args.duration)
        finally:
            stop.set()
            for p in procs:
                if p.pid:
                    try:
                        os.kill(p.pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + 60
            for p in procs:
                p.join(max(0.1, deadline - time.monotonic()))
            meta["client_exit"] = []
            for p in procs:
                if p.is_alive():
                    p.terminate()
                    p.join(5)
                meta["client_exit"].append(p.exitcode)
        meta["end"] = time.monotonic()
        meta["final_server"] = inj.primary.name
        meta["promoted"] = inj.promoted
        inj.primary.wait_ready(writable=True)
        dump_database(inj.primary, os.path.join(run_dir, "db.json"), recorder)
        for s in servers:
            s.stop("fast", check=False)
        for s in servers:
            if os.path.exists(s.logfile):
                shutil.copy(s.logfile, os.path.join(run_dir, os.path.basename(s.logfile)))
        with open(os.path.join(run_dir, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)

        report = check.check_run(run_dir)
        print(report.summary(), flush=True)
        found = bool(report.violations)
        if args.plant:
            ok = found
            say(f"planted bug {args.plant}: " + ("found, as expected" if found else
                                                 "NOT found: the stress missed it"))
        else:
            ok = not found
        if found:
            print_server_lines(run_dir)
            say(f"seed {args.seed}; rerun with: {rerun}")
        say(f"{'PASS' if ok else 'FAIL'} in {time.monotonic() - t0:.0f} s")
        return 0 if ok else 1
    except (ClusterError, psycopg.Error, OSError, record.DecodeError) as e:
        say(f"setup or harness error: {e}")
        say(f"seed {args.seed}; rerun with: {rerun}")
        for s in servers:
            if os.path.exists(s.logfile):
                with open(s.logfile) as f:
                    tail = f.readlines()[-30:]
                print(f"--- last lines of {os.path.basename(s.logfile)}:\n" + "".join(tail))
        return 2
    finally:
        for p in procs:
            if p.is_alive():
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.terminate()
                p.join(5)
        for s in servers:
            if s.running():
                s.stop("immediate", check=False)
        if args.keep or not ok:
            # the data directories are large; the logs and the dump are kept
            for s in servers:
                shutil.rmtree(s.datadir, ignore_errors=True)
            shutil.rmtree(os.path.join(root, "build"), ignore_errors=True)
            shutil.rmtree(os.path.join(root, "prefix"), ignore_errors=True)
            say(f"logs kept in {run_dir}")
        else:
            shutil.rmtree(root, ignore_errors=True)
