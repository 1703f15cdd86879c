"""A throwaway PostgreSQL cluster for the stress test: initdb, start, stop,
crash, a streaming standby and its promotion.

Every server runs as the calling (unprivileged) user, in a directory the
caller made, with its socket there and no TCP listener.  Waits poll with a
deadline; nothing sleeps a fixed time for an outcome.
"""
import os
import subprocess
import time

import psycopg


class ClusterError(Exception):
    pass


def poll(what, cond, timeout=60.0, every=0.05):
    """Call cond() until it returns a true value; return it, or raise
    ClusterError after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out waiting for {what}")
        time.sleep(every)


class Server:
    """One data directory and its postmaster."""

    def __init__(self, name, bindir, root, sockdir, port):
        self.name = name
        self.bindir = bindir
        self.datadir = os.path.join(root, name)
        self.logfile = os.path.join(root, f"server-{name}.log")
        self.sockdir = sockdir
        self.port = port

    def bin(self, prog):
        return os.path.join(self.bindir, prog)

    def run(self, *args, check=True):
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if check and r.returncode != 0:
            raise ClusterError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stdout}")
        return r

    def conninfo(self, **extra):
        parts = [f"host={self.sockdir}", f"port={self.port}", "dbname=postgres",
                 "connect_timeout=5"]
        parts += [f"{k}={v}" for k, v in extra.items()]
        return " ".join(parts)

    def connect(self, **kw):
        return psycopg.connect(self.conninfo(), autocommit=True, **kw)

    def initdb(self, conf):
        self.run(self.bin("initdb"), "-D", self.datadir, "-A", "trust", "-N",
                 "--no-instructions")
        with open(os.path.join(self.datadir, "postgresql.conf"), "a") as f:
            f.write(conf)
            f.write(f"\nport = {self.port}\n")

    def start(self):
        self.run(self.bin("pg_ctl"), "-D", self.datadir, "-l", self.logfile,
                 "-w", "-t", "120", "start")
        self.wait_ready()

    def stop(self, mode="fast", check=True):
        return self.run(self.bin("pg_ctl"), "-D", self.datadir, "-m", mode,
                        "-w", "-t", "120", "stop", check=check)

    def running(self):
        r = self.run(self.bin("pg_ctl"), "-D", self.datadir, "status", check=False)
        return r.returncode == 0

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.datadir, "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def ready(self, writable=False):
        """True if a session can be opened (and, if asked, can write)."""
        try:
            with self.connect() as c:
                if writable:
                    return not c.execute("SELECT pg_is_in_recovery()").fetchone()[0]
                return True
        except psycopg.Error:
            return False

    def wait_ready(self, writable=False, timeout=120.0):
        poll(f"server {self.name} to accept connections",
             lambda: self.ready(writable), timeout=timeout)

    def sql(self, query, params=None):
        with self.connect() as c:
            cur = c.execute(query, params)
            return cur.fetchall() if cur.description else None

    def base_backup_to(self, other):
        self.run(self.bin("pg_basebackup"), "-D", other.datadir, "-R", "-X", "stream",
                 "-c", "fast", "-h", self.sockdir, "-p", str(self.port))
        with open(os.path.join(other.datadir, "postgresql.conf"), "a") as f:
            f.write(f"\nport = {other.port}\n")

    def promote(self):
        self.run(self.bin("pg_ctl"), "-D", self.datadir, "-w", "-t", "120", "promote")
        self.wait_ready(writable=True)
