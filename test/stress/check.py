#!/usr/bin/python3
"""Offline checker of a pg_tenure stress run.

    python3 test/stress/check.py RUN_DIR

RUN_DIR holds what test/stress/run saved: meta.json (leases, ttl, hold-off,
whether and when a standby was promoted), clients/c*.jsonl (every call with
its send time "s", receive time "r" and outcome), faults.jsonl, db.json
(every fenced row and every issued epoch with its commit timestamp) and the
server logs.  check_run() returns a Report; the command prints it and exits
1 if it holds a violation.

Times.  Client times are CLOCK_MONOTONIC seconds, one clock for every
process of the machine.  Commit timestamps are the server's wall clock in
microseconds and are compared only with each other, never with client
times (a step of the wall clock during a run would void rule 4's order).  Every rule below leans the same way: where a time is uncertain
(a call happened somewhere between its send and its receive time) the rule
takes the end of that window that makes a violation harder to claim, so
that a reported violation is one the documented guarantees forbid.

The rules:

1. Calls (check_calls).  Every call answered, or failed with a SQLSTATE the
   README documents for it, or with one that the injected faults cause:
   57P01 (pg_terminate_backend, shutdown), 57P02 (crash of another
   process), 57P03 (server starting), 08xxx and a connection lost without
   a SQLSTATE ("conn").  Every client process exited with status 0.

2. Leaders (check_leaders), for leases with the automatic hold-off only
   (with a fixed hold-off of 0 two holders may lead at once by design,
   and only the fence protects).  A client believes it leads by the client
   rule: from the *receive* time of a leader_is or await_active that
   answered true, until the *send* time of its last successful renew (or
   acquire returning its epoch) + ttl.  The belief ends earlier at the
   send time of a release (whatever its outcome), of a false renew,
   leader_is or await_active, of a NULL acquire or a TN001 from
   acquire_or_error or claim_epoch, and of an acquire that returned a new
   epoch (a new tenure may be in its hold-off: a new true answer is needed).
   A renewal sent after the belief's bound does not revive it.  An
   acquire in a transaction that commits later counts from the send time
   of the acquire statement (the reservation's ttl counts from the call)
   and only if its COMMIT returned.  Starting at the receive time and
   ending at send times makes each belief shorter than the truth.  No two
   clients' beliefs of one lease may overlap.  Not checked under
   synchronous_commit = off (--async), where a crash may lose an
   acquisition and with it the hold-off bound it set, as the README says.

3. Epochs (check_epochs), from the logs: an epoch returned to one holder is
   never returned to another; an epoch returned by a call sent after
   another call had returned epoch E is greater than E, or equal for an
   acquire by E's holder (a renewal).  So epochs rise across crashes,
   restarts and the promotion, including epochs the standby never received.
   From the database: no (lease, epoch) issued twice, and each issued to the
   holder the logs say.  Every epoch a call returned was issued durably,
   except on the old primary of a promotion (asynchronous replication may
   lose it) and under synchronous_commit = off, where only the rules on
   the logs hold: a lost epoch is never issued again.

4. Fenced rows (check_rows), from the database: in commit order
   (pg_xact_commit_timestamp) a lease's rows carry non-decreasing epochs;
   each row's epoch was issued to the row's writer; no row committed after
   a greater epoch of its lease was issued (the issue's commit timestamp:
   read from the WAL by logical decoding, record.py; with --standby a
   trigger on tenure.history records each epoch in stress.issued in the
   issuing transaction).  Equal timestamps are not ordered.  The rows
   agree with the calls: a write whose COMMIT returned has its row (except
   on the old primary of a promotion), a write that failed with a definite
   SQLSTATE (TN002, say) has none, every row has its call.

5. Server log (check_server_log): no PANIC, no TRAP (failed assertion), no
   process "terminated by signal" other than the keepers the stress killed
   with SIGKILL, no background worker or server process "exited with exit
   code" other than keepers the stress sent SIGTERM, and no ERROR or FATAL
   from the keeper other than its shutdown on SIGTERM.

6. The run did something: tenures were acquired and led, fenced writes
   committed and were rejected.
"""
import bisect
import collections
import glob
import json
import os
import re
import sys

# SQLSTATEs the injected faults cause, for any call
FAULT_CODES = {"57P01", "57P02", "57P03", "conn"}
# SQLSTATEs the README documents for each call in this workload
DOCUMENTED = {
    # TN001: an acquisition whose COMMIT came after its ttl; 55P03: a new
    # tenure waited tenure.claim_timeout for committing writers, or could
    # not end an expired acquisition's transaction
    "acquire": {"TN001", "55P03"},
    "acquire_or_error": {"TN001", "55P03"},
    "claim_epoch": {"TN001", "55P03"},
    "renew": set(),
    "release": set(),
    "leader_is": set(),
    "current_epoch": set(),
    "await_active": set(),
    "await_change": set(),
    "write": {"TN002"},
    "connect": set(),
}
# a failed call with one of these may or may not have taken effect
AMBIGUOUS = FAULT_CODES


# with more leases than tenure.max_leases slots (--tight): 53400 when every
# slot is held, being acquired or in a hold-off, for the calls that take one
SLOT_CALLS = {"acquire", "acquire_or_error", "claim_epoch", "write"}


def code_allowed(op, code, tight=False):
    if tight and code == "53400" and op in SLOT_CALLS:
        return True
    return code in FAULT_CODES or code.startswith("08") or code in DOCUMENTED.get(op, set())


class Report:
    def __init__(self):
        self.violations = []
        self.stats = collections.OrderedDict()
        self.notes = []

    def fail(self, rule, msg):
        self.violations.append(f"[{rule}] {msg}")

    def summary(self):
        out = ["== pg_tenure stress: summary =="]
        for k, v in self.stats.items():
            out.append(f"{k}: {v}")
        for n in self.notes:
            out.append(f"note: {n}")
        if self.violations:
            by_rule = collections.OrderedDict()
            for v in self.violations:
                by_rule.setdefault(v[:v.index("]") + 1], []).append(v)
            out.append(f"== {len(self.violations)} violation(s): "
                       + ", ".join(f"{r} {len(vs)}" for r, vs in by_rule.items()) + " ==")
            for vs in by_rule.values():
                out.extend(vs[:10])
                if len(vs) > 10:
                    out.append(f"... and {len(vs) - 10} more of these")
        else:
            out.append("== no violations ==")
        return "\n".join(out)


class Run:
    """A run's saved logs, loaded."""

    def __init__(self, meta, calls, faults, db, server_logs):
        self.meta = meta
        self.calls = calls            # client -> [call records in order]
        self.faults = faults
        self.db = db
        self.server_logs = server_logs  # name -> [lines]
        self.leases = meta["leases"]
        self.promoted_at = None
        for f in faults:
            if f["fault"] == "promoted":
                self.promoted_at = f["t"]

    @classmethod
    def load(cls, d):
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        calls = {}
        for p in sorted(glob.glob(os.path.join(d, "clients", "c*.jsonl"))):
            recs = [json.loads(l) for l in open(p) if l.strip()]
            if recs:
                calls[recs[0]["c"]] = sorted(recs, key=lambda r: r["n"])
        faults = []
        fp = os.path.join(d, "faults.jsonl")
        if os.path.exists(fp):
            faults = [json.loads(l) for l in open(fp) if l.strip()]
        db = None
        if os.path.exists(os.path.join(d, "db.json")):
            with open(os.path.join(d, "db.json")) as f:
                db = json.load(f)
        logs = {}
        for p in sorted(glob.glob(os.path.join(d, "server-*.log"))):
            with open(p, errors="replace") as f:
                logs[os.path.basename(p)] = f.read().splitlines()
        return cls(meta, calls, faults, db, logs)

    def all_calls(self):
        for c in sorted(self.calls):
            yield from self.calls[c]

    def may_be_lost(self, rec):
        """A call acknowledged by the old primary of a promotion (its effect
        may never have reached the standby), or any call under
        synchronous_commit = off (a crash may lose its commit)."""
        if self.meta.get("async"):
            return True
        return self.promoted_at is not None and rec["s"] < self.promoted_at


def fmt(rec):
    keep = {k: rec[k] for k in ("c", "n", "op", "lease", "res", "err", "epoch", "row") if k in rec}
    return json.dumps(keep, separators=(",", ":")) + f" s={rec['s']:.4f} r={rec.get('r', 0):.4f}"


def check_calls(run, rep):
    by_kind = collections.Counter()
    for rec in run.all_calls():
        outcome = "ok" if rec["ok"] else rec["err"]
        by_kind[(rec["op"], outcome)] += 1
        if not rec["ok"] and not code_allowed(rec["op"], rec["err"], run.meta.get("tight")):
            rep.fail("calls", f"undocumented SQLSTATE {rec['err']} from {rec['op']}: "
                     f"{rec.get('msg', '')!r} {fmt(rec)}")
    ops = collections.defaultdict(dict)
    for (op, outcome), n in sorted(by_kind.items()):
        ops[op][outcome] = n
    txn = collections.Counter(("epoch" if r.get("res") is not None else "NULL") if r["ok"] else r["err"]
                              for r in run.all_calls() if r["op"] == "acquire" and r.get("txn"))
    rep.stats["calls"] = sum(by_kind.values())
    rep.stats["acquire in a transaction, by outcome"] = json.dumps(dict(sorted(txn.items())))
    rep.stats["calls by kind"] = json.dumps(ops, sort_keys=True)
    for i, code in enumerate(run.meta.get("client_exit", [])):
        if code != 0:
            rep.fail("calls", f"client c{i} exited with status {code}")


def beliefs(run, calls, lease, ttl):
    """The client rule's belief intervals of one client for one lease:
    [(start, end, why_start, why_end)]."""
    out = []
    bound = float("-inf")     # send time of the last successful renew + ttl
    since = None              # receive time of the true answer that began the belief
    start_rec = None
    epoch = None

    def end(t, rec):
        nonlocal since, start_rec
        if since is not None:
            e = min(t, bound)
            if e > since:
                out.append((since, e, start_rec, rec))
            since, start_rec = None, None

    for rec in calls:
        if rec.get("lease") != lease or rec["op"] in ("write", "connect", "current_epoch",
                                                      "await_change"):
            continue
        s = rec["s"]
        if since is not None and s >= bound:
            end(bound, None)        # the belief expired by the rule
        op, ok, res = rec["op"], rec["ok"], rec.get("res")
        if op in ("acquire", "acquire_or_error"):
            if ok and res is not None:
                if epoch is not None and res != epoch:
                    end(s, rec)
                epoch = res
                bound = s + ttl
            elif ok or rec.get("err") == "TN001":
                end(s, rec)
                epoch = None
        elif op == "renew":
            if ok and res:
                bound = s + ttl
            elif ok:
                end(s, rec)
        elif op == "release":
            end(s, rec)
            if ok:
                epoch = None
        elif op in ("leader_is", "await_active"):
            if ok and res:
                if since is None and rec["r"] < bound:
                    since, start_rec = rec["r"], rec
            elif ok:
                end(s, rec)
        elif op == "claim_epoch":
            if ok and res is not None:
                epoch = res
            elif rec.get("err") == "TN001":
                end(s, rec)
    end(float("inf"), None)
    return out


def check_leaders(run, rep):
    total = 0
    if run.meta.get("async"):
        # a crash that loses an acquisition's asynchronous commit loses its
        # hold-off bound too (README, "How fast is failover?")
        rep.notes.append("leaders not checked: synchronous_commit = off")
        return None
    for lease, cfg in sorted(run.leases.items()):
        if cfg["holdoff"] is not None:
            continue
        ivs = []
        for c, calls in sorted(run.calls.items()):
            for b in beliefs(run, calls, lease, cfg["ttl"]):
                ivs.append((b[0], b[1], c, b[2], b[3]))
        total += len(ivs)
        ivs.sort(key=lambda x: x[0])
        active = []
        for iv in ivs:
            active = [a for a in active if a[1] > iv[0]]
            for a in active:
                if a[2] != iv[2]:
                    lo, hi = max(a[0], iv[0]), min(a[1], iv[1])
                    rep.fail("leaders", f"lease {lease}: c{a[2]} and c{iv[2]} both believed they led"
                             f" for {hi - lo:.4f} s from {lo:.4f}: c{a[2]} [{a[0]:.4f}, {a[1]:.4f})"
                             f" begun by {fmt(a[3])}; c{iv[2]} [{iv[0]:.4f}, {iv[1]:.4f})"
                             f" begun by {fmt(iv[3])}")
            active.append(iv)
    rep.stats["leader beliefs (automatic hold-off leases)"] = total
    return total


def returned_epochs(run):
    out = []
    for rec in run.all_calls():
        if rec["op"] in ("acquire", "acquire_or_error", "claim_epoch") and rec["ok"] \
                and rec.get("res") is not None:
            out.append(rec)
    return out


def check_epochs(run, rep):
    got = returned_epochs(run)
    holders = collections.defaultdict(dict)
    for rec in got:
        h = holders[(rec["lease"], rec["res"])]
        h.setdefault(f"c{rec['c']}", rec)
    for (lease, epoch), h in sorted(holders.items()):
        if len(h) > 1:
            rep.fail("epochs", f"lease {lease}: epoch {epoch} returned to {len(h)} holders: "
                     + "; ".join(fmt(r) for r in h.values()))
    per_lease = collections.defaultdict(list)
    for rec in got:
        per_lease[rec["lease"]].append(rec)
    for lease, recs in sorted(per_lease.items()):
        by_r = sorted(recs, key=lambda r: r["r"])
        rtimes = [r["r"] for r in by_r]
        best = []       # prefix maximum of epochs by receive time
        m = None
        for r in by_r:
            if m is None or r["res"] > m["res"]:
                m = r
            best.append(m)
        for rec in recs:
            i = bisect.bisect_left(rtimes, rec["s"])
            if i == 0:
                continue
            prev = best[i - 1]
            e, pe = rec["res"], prev["res"]
            if e > pe:
                continue
            if e == pe and rec["op"] != "claim_epoch" and rec["c"] == prev["c"]:
                continue
            rep.fail("epochs", f"lease {lease}: {rec['op']} sent after epoch {pe} had been returned"
                     f" got {'the same' if e == pe else 'a smaller'} epoch {e}: "
                     f"earlier {fmt(prev)}; later {fmt(rec)}")
    rep.stats["epochs returned"] = len(holders)

    if run.db is None:
        rep.fail("epochs", "no database dump (db.json)")
        return
    issued = collections.defaultdict(list)
    for lease, epoch, holder, cts in run.db["issued"]:
        issued[(lease, epoch)].append(holder)
    for (lease, epoch), hs in sorted(issued.items()):
        if len(hs) > 1:
            rep.fail("epochs", f"lease {lease}: epoch {epoch} issued {len(hs)} times, to {hs}")
    rep.stats["epochs issued (database)"] = len(issued)
    lost = collections.Counter()
    for (lease, epoch), h in sorted(holders.items()):
        for holder, rec in h.items():
            if (lease, epoch) in issued:
                if holder not in issued[(lease, epoch)]:
                    rep.fail("epochs", f"lease {lease}: epoch {epoch} returned to {holder} but issued"
                             f" to {issued[(lease, epoch)]}: {fmt(rec)}")
            elif not run.may_be_lost(rec):
                rep.fail("epochs", f"lease {lease}: epoch {epoch} returned to {holder} is not in"
                         f" the database: {fmt(rec)}")
            else:
                lost[rec["op"]] += 1
    if lost:
        rep.notes.append("epochs returned but not in the final database (lost with an"
                         " asynchronous commit or by the promotion): " + json.dumps(dict(lost)))


def check_rows(run, rep):
    if run.db is None:
        return
    issued = collections.defaultdict(list)      # lease -> [(cts, epoch, holder)]
    issued_holder = {}
    for lease, epoch, holder, cts in run.db["issued"]:
        issued[lease].append((cts, epoch, holder))
        issued_holder[(lease, epoch)] = holder
    writes = {}
    for rec in run.all_calls():
        if rec["op"] == "write":
            writes[rec["row"]] = rec
    nrows = 0
    for lease, rows in sorted(run.db["rows"].items()):
        nrows += len(rows)
        iss = sorted(issued[lease])
        icts = [x[0] for x in iss]
        imax = []
        m = None
        for x in iss:
            if m is None or x[1] > m[1]:
                m = x
            imax.append(m)
        rows = sorted(rows, key=lambda r: r[3])
        for writer, epoch, row, cts in rows:
            rec = writes.get(row)
            where = fmt(rec) if rec else f"row {row}"
            if cts is None:
                rep.fail("rows", f"lease {lease}: row {row} has no commit timestamp")
                continue
            h = issued_holder.get((lease, epoch))
            if h is None:
                rep.fail("rows", f"lease {lease}: row {row} by {writer} committed with epoch {epoch},"
                         f" which was never issued: {where}")
            elif h != writer:
                rep.fail("rows", f"lease {lease}: row {row} by {writer} committed with epoch {epoch},"
                         f" issued to {h}: {where}")
            i = bisect.bisect_left(icts, cts)   # issues committed strictly before the row
            if i > 0 and imax[i - 1][1] > epoch:
                newer = imax[i - 1]
                rep.fail("rows", f"lease {lease}: row {row} by {writer} with epoch {epoch} committed at"
                         f" {cts} after epoch {newer[1]} (holder {newer[2]}) was issued at {newer[0]}"
                         f" ({cts - newer[0]} us earlier): {where}")
        prev = None
        for writer, epoch, row, cts in rows:
            if prev is not None and cts > prev[3] and epoch < prev[1]:
                rep.fail("rows", f"lease {lease}: row {row} (epoch {epoch}, committed {cts}) committed"
                         f" after row {prev[2]} (epoch {prev[1]}, committed {prev[3]})")
            if prev is None or epoch >= prev[1]:
                prev = (writer, epoch, row, cts)
    # rows against calls
    in_db = {}
    for lease, rows in run.db["rows"].items():
        for writer, epoch, row, cts in rows:
            in_db[row] = (lease, writer, epoch)
    all_exited = all(c == 0 for c in run.meta.get("client_exit", []))
    committed = rejected = lost_rows = 0
    for row, rec in sorted(writes.items()):
        if rec["ok"]:
            committed += 1
            if row not in in_db:
                if not run.may_be_lost(rec):
                    rep.fail("rows", f"write acknowledged but its row is missing: {fmt(rec)}")
                else:
                    lost_rows += 1
        else:
            if rec["err"] == "TN002":
                rejected += 1
            if row in in_db and rec["err"] not in AMBIGUOUS and not rec["err"].startswith("08"):
                rep.fail("rows", f"write failed with {rec['err']} but its row committed: {fmt(rec)}"
                         f" {rec.get('msg', '')!r}")
    if lost_rows:
        rep.notes.append(f"{lost_rows} acknowledged fenced write(s) not in the final database"
                         " (lost with an asynchronous commit or by the promotion)")
    if all_exited:
        for row in sorted(set(in_db) - set(writes)):
            rep.fail("rows", f"row {row} {in_db[row]} has no write in the client logs")
    # not a rule: rows committed after their own epoch's release committed
    released = {(l, e): cts for l, e, cts in run.db.get("released", [])}
    late = []
    for lease, rows in run.db["rows"].items():
        for writer, epoch, row, cts in rows:
            rc = released.get((lease, epoch))
            if rc is not None and cts is not None and cts > rc:
                late.append(f"{lease}:{row}:+{cts - rc}us")
    if late:
        rep.notes.append(f"{len(late)} fenced row(s) committed after their epoch's release"
                         f" committed (the README orders fenced commits only with new epochs):"
                         f" {', '.join(late[:10])}")
    rep.stats["fenced rows committed"] = nrows
    at_commit = sum(1 for r in writes.values()
                    if not r["ok"] and r["err"] == "TN002" and r.get("stage") == "commit")
    rep.stats["fenced writes acknowledged / rejected with TN002 (of which at COMMIT)"] = \
        f"{committed} / {rejected} ({at_commit})"
    return committed, rejected


SIG_RE = re.compile(r'(.*) \(PID (\d+)\) was terminated by (signal \d+|exception)')
EXIT_RE = re.compile(r'(.*) \(PID (\d+)\) exited with exit code (\d+)')


def check_server_log(run, rep):
    killed = {f["pid"] for f in run.faults if f["fault"] == "keeper_sigkill"}
    termed = {f["pid"] for f in run.faults if f["fault"] == "keeper_sigterm"}
    expected_crashes = len(killed)
    seen_crashes = 0
    n = 0
    for name, lines in sorted(run.server_logs.items()):
        # between a shutdown request or the start of a crash restart and
        # the next "ready", background workers exit with status 1 on their
        # own: those exits are not causes
        stopping = False
        for line in lines:
            n += 1
            where = f"{name}: {line.strip()}"
            if re.search(r"received (smart|fast|immediate) shutdown request"
                         r"|terminating any other active server processes", line):
                stopping = True
            elif "database system is ready to accept" in line:
                stopping = False
            if "PANIC:" in line or line.startswith("TRAP:") or " TRAP:" in line:
                rep.fail("server log", where)
                continue
            m = SIG_RE.search(line)
            if m:
                pid = int(m.group(2))
                if pid in killed and "pg_tenure keeper" in m.group(1):
                    seen_crashes += 1
                else:
                    rep.fail("server log", f"unexpected crash: {where}")
                continue
            m = EXIT_RE.search(line)
            if m:
                pid = int(m.group(2))
                if stopping and "background worker" in m.group(1) and m.group(3) == "1":
                    continue
                if not (pid in termed and "pg_tenure keeper" in m.group(1) and m.group(3) == "1"):
                    rep.fail("server log", f"unexpected exit: {where}")
                continue
            if " pg_tenure keeper " in line and re.search(r"\b(ERROR|FATAL):", line) \
                    and "due to administrator command" not in line:
                rep.fail("server log", f"keeper error: {where}")
    if seen_crashes != expected_crashes:
        rep.notes.append(f"{expected_crashes} keeper SIGKILLs injected, {seen_crashes} crash"
                         f" messages in the server log")
    rep.stats["server log lines"] = n


def check_faults(run, rep):
    events = {"ready", "stopped", "client_cont", "promote_begin"}   # a fault's steps
    kinds = collections.Counter(f["fault"] for f in run.faults if f["fault"] not in events)
    rep.stats["faults"] = json.dumps(dict(sorted(kinds.items())))
    for f in run.faults:
        if f["fault"] == "harness_error":
            rep.fail("harness", f["msg"])


def check_run(d):
    """Check the run saved in directory d."""
    return check(Run.load(d))


def check(run):
    """Check a loaded Run; return its Report."""
    rep = Report()
    rep.stats["seed"] = run.meta.get("seed")
    check_faults(run, rep)
    check_calls(run, rep)
    nbeliefs = check_leaders(run, rep)
    check_epochs(run, rep)
    res = check_rows(run, rep)
    check_server_log(run, rep)
    if nbeliefs == 0 and not run.meta.get("async"):
        rep.fail("vacuous", "no client ever believed it led a lease with the automatic hold-off")
    if res is not None and (res[0] == 0 or res[1] == 0):
        rep.fail("vacuous", f"fenced writes: {res[0]} acknowledged, {res[1]} rejected; the run"
                 " exercised too little")
    return rep


def main(argv):
    if len(argv) != 1:
        print("usage: check.py RUN_DIR", file=sys.stderr)
        return 2
    rep = check_run(argv[0])
    print(rep.summary())
    return 1 if rep.violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
