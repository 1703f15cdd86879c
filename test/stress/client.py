"""One stress client: a process with its own holder name that runs random
pg_tenure calls and fenced writes, and logs every call.

Each call is one JSON line in the client's log:

    {"c": 3, "n": 17, "op": "renew", "lease": "l0", "s": 12.3, "r": 12.4,
     "ok": true, "res": true}
    {"c": 3, "n": 18, "op": "write", "lease": "l2", "epoch": 1125..., "s": ...,
     "r": ..., "ok": false, "err": "TN002", "stage": "commit", "msg": "..."}

"s" is taken before the call is sent and "r" after its answer arrived, both
from time.monotonic() (CLOCK_MONOTONIC, one clock for every process of the
machine, the clock the server's lease arithmetic uses too).  "err" is the
SQLSTATE, or "conn" for a connection lost or refused without one.  A fenced
write logs its row's key ("row") so the checker can match the table's rows
with the calls that wrote them.  An acquire in a transaction ("txn": true)
is logged as an acquire from the send time of its statement to the answer
of its COMMIT, followed by the leader_is it asked inside the transaction.

The client keeps only what a real client would: the epoch each acquire or
claim returned.  It does not decide anything by the client rule; the
checker derives every belief from the log.  Writes present whatever epoch
the client last got, sometimes an older one, so stale writers are common.
"""
import json
import os
import random
import signal
import time

import psycopg

OPS = [  # (operation, weight)
    ("acquire", 22), ("renew", 18), ("leader_is", 18), ("write", 20),
    ("release", 5), ("await_active", 4), ("await_change", 3),
    ("claim_epoch", 4), ("acquire_or_error", 2), ("current_epoch", 2),
    ("acquire_txn", 4),
]
HOLDER_OPS = [  # on a lease that the client's last acquire or claim got
    ("acquire", 10), ("renew", 25), ("leader_is", 25), ("write", 25),
    ("release", 5), ("await_active", 5), ("claim_epoch", 4),
]


def interval(seconds):
    return f"{seconds:.3f} s"


class Client:
    def __init__(self, idx, cfg, stop, phase):
        self.idx = idx
        self.holder = f"c{idx}"
        self.cfg = cfg
        self.stop = stop
        self.phase = phase
        self.rnd = random.Random(cfg["seed"] * 1009 + idx)
        self.log = open(os.path.join(cfg["dir"], "clients", f"c{idx}.jsonl"), "w",
                        buffering=1)
        self.n = 0
        self.ctl = None     # autocommit: lease calls
        self.wr = None      # transactions: fenced writes
        self.known = {}     # lease -> epoch last returned to us
        self.seen = {}      # lease -> epochs returned to us

    def emit(self, rec):
        self.log.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def connect(self, role):
        """A new connection for role "ctl" or "wr", or None (logged) if the
        server cannot be reached now."""
        self.n += 1
        s = time.monotonic()
        try:
            conn = psycopg.connect(
                self.cfg["conninfo"] + f" application_name=stress-{self.holder}-{role}",
                autocommit=(role == "ctl"),
                options="-c statement_timeout=30000")
        except psycopg.Error as e:
            self.emit({"c": self.idx, "n": self.n, "op": "connect", "role": role,
                       "s": s, "r": time.monotonic(), "ok": False,
                       **error_fields(e)})
            time.sleep(self.rnd.uniform(0.05, 0.15))    # back off while the server restarts
            return None
        return conn

    def conn(self, role):
        c = getattr(self, role)
        if c is None or c.closed or c.broken:
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass
            c = self.connect(role)
            setattr(self, role, c)
        return c

    def call(self, op, lease, query, params, extra=None, one=True):
        """Run one autocommit statement on the control connection and log it."""
        c = self.conn("ctl")
        if c is None:
            return None, False
        self.n += 1
        rec = {"c": self.idx, "n": self.n, "op": op, "lease": lease}
        if extra:
            rec.update(extra)
        rec["s"] = time.monotonic()
        try:
            row = c.execute(query, params).fetchone()
            rec["r"] = time.monotonic()
            res = row[0] if one else list(row)
            rec.update(ok=True, res=res)
            self.emit(rec)
            return res, True
        except psycopg.Error as e:
            rec["r"] = time.monotonic()
            rec.update(ok=False, **error_fields(e))
            self.emit(rec)
            return None, False

    def got_epoch(self, lease, epoch):
        self.known[lease] = epoch
        self.seen.setdefault(lease, []).append(epoch)

    def pick_lease(self):
        held = [l for l in self.known if self.known[l] is not None]
        if held and self.rnd.random() < 0.6:
            return self.rnd.choice(held)
        return self.rnd.choice(self.cfg["lease_names"])

    def step(self):
        lease = self.pick_lease()
        names, weights = zip(*(HOLDER_OPS if self.known.get(lease) else OPS))
        op = self.rnd.choices(names, weights)[0]
        h = self.holder
        r = self.rnd
        if op == "acquire":
            wait = 0.0 if r.random() < 0.5 else r.uniform(0.05, 0.6)
            sb = r.random() < 0.5
            e, ok = self.call(op, lease,
                              "SELECT tenure.acquire(%s, %s, wait => %s::interval, session_bound => %s)",
                              [lease, h, interval(wait), sb],
                              {"wait": wait, "session_bound": sb})
            if ok:
                if e is not None:
                    self.got_epoch(lease, e)
                else:
                    self.known[lease] = None
        elif op == "acquire_or_error":
            sb = r.random() < 0.5
            e, ok = self.call(op, lease,
                              "SELECT tenure.acquire_or_error(%s, %s, session_bound => %s)",
                              [lease, h, sb], {"session_bound": sb})
            if ok and e is not None:
                self.got_epoch(lease, e)
        elif op == "renew":
            self.call(op, lease, "SELECT tenure.renew(%s, %s)", [lease, h])
        elif op == "release":
            res, ok = self.call(op, lease, "SELECT tenure.release(%s, %s)", [lease, h])
            if ok:
                self.known[lease] = None
        elif op == "leader_is":
            self.call(op, lease, "SELECT tenure.leader_is(%s, %s)", [lease, h])
        elif op == "current_epoch":
            self.call(op, lease, "SELECT tenure.current_epoch(%s)", [lease])
        elif op == "await_active":
            t = r.uniform(0.05, 1.0)
            self.call(op, lease, "SELECT tenure.await_active(%s, %s, %s::interval)",
                      [lease, h, interval(t)], {"timeout": t})
        elif op == "await_change":
            t = r.uniform(0.05, 0.6)
            ke = self.known.get(lease) or 0
            kh = h if self.known.get(lease) else None
            self.call(op, lease,
                      "SELECT changed, holder, epoch FROM tenure.await_change(%s, %s, %s, %s::interval)",
                      [lease, ke, kh, interval(t)],
                      {"known_epoch": ke, "known_holder": kh, "timeout": t}, one=False)
        elif op == "claim_epoch":
            e, ok = self.call(op, lease, "SELECT tenure.claim_epoch(%s, %s)", [lease, h])
            if ok and e is not None:
                self.got_epoch(lease, e)
        elif op == "write":
            self.write(lease)
        elif op == "acquire_txn":
            self.acquire_txn(lease)

    def acquire_txn(self, lease):
        """acquire in a transaction that asks leader_is and commits after a
        pause, sometimes past the ttl (its COMMIT then fails with TN001, or
        a taker terminates the session).  Logged as one acquire whose send
        time is the acquire statement's (the ttl counts from there) and
        whose receive time is the COMMIT's answer, and as the leader_is."""
        r = self.rnd
        ttl = self.cfg["ttl"][lease]
        x = r.random()
        pause = r.uniform(0, 0.05) if x < 0.6 else (
            r.uniform(0.1, 0.8) if x < 0.75 else ttl + r.uniform(0.1, 0.5))
        sb = r.random() < 0.5
        c = self.conn("wr")
        if c is None:
            return
        self.n += 1
        rec = {"c": self.idx, "n": self.n, "op": "acquire", "lease": lease, "txn": True,
               "session_bound": sb, "pause": round(pause, 4)}
        self.n += 1
        inner = {"c": self.idx, "n": self.n, "op": "leader_is", "lease": lease, "txn": True}
        stage = "statement"
        rec["s"] = time.monotonic()
        try:
            e = c.execute("SELECT tenure.acquire(%s, %s, session_bound => %s)",
                          [lease, self.holder, sb]).fetchone()[0]
            inner["s"] = time.monotonic()
            inner["res"] = c.execute("SELECT tenure.leader_is(%s, %s)",
                                     [lease, self.holder]).fetchone()[0]
            inner["r"] = time.monotonic()
            inner["ok"] = True
            time.sleep(pause)           # the transaction's own work
            stage = "commit"
            c.commit()
            rec["r"] = time.monotonic()
            rec.update(ok=True, res=e, stage=stage)
        except psycopg.Error as ex:
            rec["r"] = time.monotonic()
            rec.update(ok=False, stage=stage, **error_fields(ex))
            try:
                if not c.closed and not c.broken:
                    c.rollback()
            except psycopg.Error:
                pass
        if rec["ok"]:
            if rec["res"] is not None:
                self.got_epoch(lease, rec["res"])
            else:
                self.known[lease] = None
        self.emit(rec)
        if "ok" in inner:
            self.emit(inner)

    def write(self, lease):
        """A fenced write: present a token, insert a row, pause, commit."""
        r = self.rnd
        epochs = self.seen.get(lease, [])
        if not epochs:
            return
        epoch = self.known.get(lease) or epochs[-1]
        if r.random() < 0.1:
            epoch = r.choice(epochs)
        x = r.random()
        pause = r.uniform(0, 0.05) if x < 0.7 else (
            r.uniform(0.05, 0.4) if x < 0.95 else r.uniform(0.5, 2.5))
        c = self.conn("wr")
        if c is None:
            return
        self.n += 1
        row = f"{self.holder}:{self.n}"
        rec = {"c": self.idx, "n": self.n, "op": "write", "lease": lease,
               "epoch": epoch, "row": row, "pause": round(pause, 4)}
        stage = "statement"
        rec["s"] = time.monotonic()
        try:
            c.execute("SELECT pg_catalog.set_config('tenure.tokens', %s, true)", [f"{lease}={epoch}"])
            c.execute(f"INSERT INTO stress.w_{lease} (writer, epoch, row) VALUES (%s, %s, %s)",
                      [self.holder, epoch, row])
            self.phase[self.idx] = 1    # between the last statement and COMMIT
            time.sleep(pause)           # the writer's own work, not a wait for anything
            stage = "commit"
            rec["c_s"] = time.monotonic()
            c.commit()
            self.phase[self.idx] = 0
            rec["r"] = time.monotonic()
            rec.update(ok=True, stage=stage)
        except psycopg.Error as e:
            self.phase[self.idx] = 0
            rec["r"] = time.monotonic()
            rec.update(ok=False, stage=stage, **error_fields(e))
            try:
                if not c.closed and not c.broken:
                    c.rollback()
            except psycopg.Error:
                pass
        self.emit(rec)

    def run(self):
        while not self.stop.is_set():
            self.step()
            # think time between calls: pacing of the workload on two cores
            time.sleep(self.rnd.uniform(0, 0.02))
        for c in (self.ctl, self.wr):
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass
        self.log.close()


def error_fields(e):
    st = getattr(e, "sqlstate", None)
    return {"err": st or "conn", "msg": str(e).strip()[:300]}


def main(idx, cfg, stop, phase):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Client(idx, cfg, stop, phase).run()
