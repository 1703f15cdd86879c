#!/usr/bin/python3
"""Tests of the stress checker on hand-made histories: a clean one passes,
each kind of violation is found, and histories that only look suspicious
(a belief that ended, a renewal after the bound, overlap on a lease with no
hold-off, faults' SQLSTATEs, an injected crash) pass.

    python3 test/stress/test_check.py
    python3 -m unittest discover -s test/stress -p 'test_*.py'
"""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402

E1, E2, E3 = 1125899906842700, 1125899906842800, 1125899906842900

LOG = [
    "2026-12-01 10:00:00.000 UTC [100] postmaster LOG:  database system is ready to accept connections",
    '2026-12-01 10:00:01.000 UTC [101] client backend ERROR:  write to table "w_a" fenced by lease "a" rejected',
]


class History:
    """Builds a run: leases a (automatic hold-off, ttl 1 s) and z (hold-off
    0, ttl 1 s), clients c0 and c1."""

    def __init__(self):
        self.calls = {0: [], 1: []}
        self.faults = []
        self.issued = []
        self.rows = {"a": [], "z": []}
        self.log = list(LOG)
        self.exits = [0, 0]
        self.promoted = False

    def call(self, c, op, lease, s, r, res=None, err=None, **kw):
        rec = {"c": c, "n": len(self.calls[c]) + 1, "op": op, "lease": lease, "s": s, "r": r,
               "ok": err is None}
        if err is None:
            rec["res"] = res
        else:
            rec.update(err=err, msg="")
        rec.update(kw)
        self.calls[c].append(rec)
        return rec

    def issue(self, lease, epoch, holder, cts):
        self.issued.append([lease, epoch, holder, cts])

    def write(self, c, lease, epoch, s, r, err=None, cts=None, stage="commit"):
        row = f"c{c}:{len(self.calls[c]) + 1}"
        self.call(c, "write", lease, s, r, err=err, epoch=epoch, row=row, stage=stage)
        if cts is not None:
            self.rows[lease].append([f"c{c}", epoch, row, cts])
        return row

    def run(self):
        meta = {"seed": 1, "leases": {"a": {"ttl": 1.0, "holdoff": None},
                                      "z": {"ttl": 1.0, "holdoff": 0.0}},
                "client_exit": self.exits}
        db = {"rows": self.rows, "issued": self.issued, "history": []}
        return check.Run(meta, copy.deepcopy(self.calls), list(self.faults), db,
                         {"server-primary.log": list(self.log)})


def clean():
    """Two clients take turns on both leases: c0 leads a, releases it, c1
    takes over; c0's write presented after the takeover fails at COMMIT."""
    h = History()
    h.call(0, "acquire", "a", 0.00, 0.01, E1)
    h.issue("a", E1, "c0", 1000)
    h.call(0, "leader_is", "a", 0.02, 0.03, True)
    h.write(0, "a", E1, 0.04, 0.06, cts=1100)
    h.call(0, "renew", "a", 0.50, 0.51, True)
    h.call(0, "release", "a", 0.90, 0.91, True)
    h.call(1, "acquire", "a", 0.95, 0.96, E2)
    h.issue("a", E2, "c1", 2000)
    h.call(1, "leader_is", "a", 0.97, 0.98, True)
    h.write(1, "a", E2, 0.99, 1.00, cts=2100)
    h.write(0, "a", E1, 0.92, 1.01, err="TN002")
    h.call(1, "renew", "a", 1.50, 1.51, False)
    # lease z: overlapping beliefs are allowed with hold-off 0
    h.call(0, "acquire", "z", 2.00, 2.01, E1 + 1)
    h.issue("z", E1 + 1, "c0", 3000)
    h.call(0, "leader_is", "z", 2.02, 2.03, True)
    h.call(1, "acquire", "z", 2.10, 2.11, E2 + 1)
    h.issue("z", E2 + 1, "c1", 3100)
    h.call(1, "leader_is", "z", 2.12, 2.13, True)
    h.call(0, "leader_is", "z", 2.14, 2.15, False)
    # faults' SQLSTATEs and documented ones
    h.call(0, "renew", "a", 2.20, 2.21, err="57P01")
    h.call(1, "renew", "a", 2.20, 2.21, err="conn")
    h.call(0, "claim_epoch", "a", 2.30, 2.31, err="TN001")
    return h


class CheckerTest(unittest.TestCase):
    def violations(self, h):
        return check.check(h.run()).violations

    def assertFinds(self, h, rule, text=""):
        v = self.violations(h)
        hits = [x for x in v if x.startswith(f"[{rule}]") and text in x]
        self.assertTrue(hits, f"expected a [{rule}] violation containing {text!r}, got {v}")

    def test_clean_history_passes(self):
        self.assertEqual(self.violations(clean()), [])

    # rule 2: leaders

    def test_overlapping_leaders(self):
        h = clean()
        # c1 is told it leads while c0's last renewal (sent at 0.50) still
        # lets c0 believe until 1.50: c0 did not release
        h.calls[0] = [r for r in h.calls[0] if r["op"] != "release"]
        self.assertFinds(h, "leaders", "c0 and c1 both believed")

    def test_belief_ended_by_false_answer(self):
        h = clean()
        h.calls[0] = [r for r in h.calls[0] if r["op"] != "release"]
        h.call(0, "leader_is", "a", 0.90, 0.91, False)
        h.calls[0].sort(key=lambda r: r["s"])
        for i, r in enumerate(h.calls[0]):
            r["n"] = i
        self.assertEqual(self.violations(h), [])

    def test_renewal_after_bound_does_not_revive(self):
        h = History()
        h.call(0, "acquire", "a", 0.00, 0.01, E1)
        h.issue("a", E1, "c0", 1000)
        h.call(0, "leader_is", "a", 0.02, 0.03, True)
        # c0's belief ends at 1.00; c1 leads from 1.20
        h.call(1, "acquire", "a", 1.10, 1.11, E2)
        h.issue("a", E2, "c1", 2000)
        h.call(1, "leader_is", "a", 1.19, 1.20, True)
        # a true renewal of c0 sent after its bound (a tenure c0 does not
        # know of, say) does not make c0 believe again
        h.call(0, "renew", "a", 1.30, 1.31, True)
        h.write(1, "a", E2, 1.3, 1.4, cts=2100)
        h.write(0, "a", E1, 1.3, 1.4, err="TN002", stage="statement")
        self.assertEqual(self.violations(h), [])

    def test_overlap_on_lease_without_holdoff_is_allowed(self):
        h = clean()
        h.calls[1] = [r for r in h.calls[1] if r["op"] != "renew"]
        self.assertEqual([v for v in self.violations(h) if v.startswith("[leaders]")], [])

    def test_wait_inside_acquire_counts_against_the_holder(self):
        h = History()
        # acquire sent at 0.0 waits 0.9 s: c0 may believe only until 1.0
        h.call(0, "acquire", "a", 0.00, 0.90, E1, wait=0.9)
        h.issue("a", E1, "c0", 1000)
        h.call(0, "leader_is", "a", 0.91, 0.92, True)
        h.call(1, "acquire", "a", 1.00, 1.01, E2)
        h.issue("a", E2, "c1", 2000)
        h.call(1, "leader_is", "a", 1.01, 1.02, True)
        h.write(1, "a", E2, 1.1, 1.2, cts=2100)
        h.write(0, "a", E1, 1.1, 1.2, err="TN002")
        self.assertEqual(self.violations(h), [])
        h.calls[0][0]["s"] = 0.2     # sent later: c0 believes until 1.2
        self.assertFinds(h, "leaders")

    # rule 3: epochs

    def test_epoch_returned_to_two_holders(self):
        h = clean()
        h.calls[1][0]["res"] = E1
        self.assertFinds(h, "epochs", f"epoch {E1} returned to 2 holders")

    def test_epoch_goes_back(self):
        h = clean()
        h.call(1, "claim_epoch", "a", 3.0, 3.01, E1 + 5)
        self.assertFinds(h, "epochs", "a smaller epoch")

    def test_claim_returning_current_epoch(self):
        h = clean()
        h.call(1, "claim_epoch", "a", 3.0, 3.01, E2)
        self.assertFinds(h, "epochs", "the same epoch")

    def test_epoch_issued_twice_in_database(self):
        h = clean()
        h.issue("a", E2, "c0", 5000)
        self.assertFinds(h, "epochs", "issued 2 times")

    def test_returned_epoch_not_durable(self):
        h = clean()
        h.issued = [i for i in h.issued if i[1] != E2]
        h.rows["a"] = [r for r in h.rows["a"] if r[1] != E2]
        h.calls[1] = [r for r in h.calls[1] if r["op"] != "write"]
        self.assertFinds(h, "epochs", "is not in the database")
        # on the old primary of a promotion the standby may have lost it
        h.faults.append({"fault": "promoted", "t": 10.0})
        self.assertEqual([v for v in self.violations(h) if "not in the database" in v], [])

    # rule 4: fenced rows

    def test_row_committed_after_newer_epoch(self):
        h = clean()
        # c0's stale write committed after c1's epoch was issued (2000)
        h.calls[0] = [r for r in h.calls[0] if not (r["op"] == "write" and not r["ok"])]
        h.write(0, "a", E1, 0.92, 1.01, cts=2050)
        self.assertFinds(h, "rows", f"after epoch {E2}")

    def test_rows_out_of_epoch_order(self):
        h = clean()
        # also ordered after a newer row; the issue rule finds it as well
        h.calls[0] = [r for r in h.calls[0] if not (r["op"] == "write" and not r["ok"])]
        h.write(0, "a", E1, 0.92, 1.01, cts=2200)
        self.assertFinds(h, "rows", "committed after row")

    def test_row_with_someone_elses_epoch(self):
        h = clean()
        h.rows["a"][1][0] = "c0"
        self.assertFinds(h, "rows", "issued to c1")

    def test_row_with_unissued_epoch(self):
        h = clean()
        h.rows["a"][1][1] = E3
        self.assertFinds(h, "rows", "never issued")

    def test_rejected_write_committed(self):
        h = clean()
        row = [r for r in h.calls[0] if r["op"] == "write" and not r["ok"]][0]["row"]
        h.rows["a"].append(["c0", E1, row, 1900])
        self.assertFinds(h, "rows", "failed with TN002 but its row committed")

    def test_terminated_write_may_have_committed(self):
        h = clean()
        w = [r for r in h.calls[0] if r["op"] == "write" and not r["ok"]][0]
        h.write(0, "a", E1, 0.70, 0.80, err="57P01", cts=1500)
        self.assertEqual(self.violations(h), [])
        self.assertTrue(w)

    def test_acknowledged_write_lost(self):
        h = clean()
        h.rows["a"] = h.rows["a"][:1]
        self.assertFinds(h, "rows", "its row is missing")

    # rule 1: calls

    def test_undocumented_sqlstate(self):
        h = clean()
        h.call(1, "renew", "a", 4.0, 4.01, err="XX000")
        self.assertFinds(h, "calls", "undocumented SQLSTATE XX000 from renew")

    def test_tn001_from_renew_is_undocumented(self):
        h = clean()
        h.call(1, "renew", "a", 4.0, 4.01, err="TN001")
        self.assertFinds(h, "calls", "TN001 from renew")

    def test_client_crashed(self):
        h = clean()
        h.exits = [0, 1]
        self.assertFinds(h, "calls", "c1 exited with status 1")

    # rule 5: server log

    def test_panic_and_trap(self):
        h = clean()
        h.log.append("2026-12-01 10:00:02.000 UTC [102] client backend PANIC:  could not write")
        h.log.append('TRAP: FailedAssertion("x", File: "src/state.c", Line: 1, PID: 103)')
        v = self.violations(h)
        self.assertTrue(any("PANIC" in x for x in v), v)
        self.assertTrue(any("TRAP" in x for x in v), v)

    def test_unexpected_crash(self):
        h = clean()
        h.log.append("2026-12-01 10:00:02.000 UTC [100] postmaster LOG:  server process"
                     " (PID 4242) was terminated by signal 11: Segmentation fault")
        self.assertFinds(h, "server log", "unexpected crash")

    def test_injected_crash_is_expected(self):
        h = clean()
        h.faults.append({"fault": "keeper_sigkill", "t": 1.0, "pid": 4343})
        h.faults.append({"fault": "keeper_sigterm", "t": 1.0, "pid": 4444})
        h.log += [
            '2026-12-01 10:00:02.000 UTC [4444] pg_tenure keeper FATAL:  terminating background'
            ' worker "pg_tenure keeper" due to administrator command',
            '2026-12-01 10:00:02.000 UTC [100] postmaster LOG:  background worker "pg_tenure keeper"'
            ' (PID 4444) exited with exit code 1',
            '2026-12-01 10:00:03.000 UTC [100] postmaster LOG:  background worker "pg_tenure keeper"'
            ' (PID 4343) was terminated by signal 9: Killed',
            "2026-12-01 10:00:03.000 UTC [100] postmaster LOG:  terminating any other active server processes",
            '2026-12-01 10:00:03.000 UTC [100] postmaster LOG:  background worker "logical replication'
            ' launcher" (PID 4545) exited with exit code 1',
            "2026-12-01 10:00:04.000 UTC [100] postmaster LOG:  database system is ready to accept connections",
        ]
        self.assertEqual(self.violations(h), [])
        h.log.append('2026-12-01 10:00:05.000 UTC [100] postmaster LOG:  background worker'
                     ' "pg_tenure keeper" (PID 4646) exited with exit code 1')
        self.assertFinds(h, "server log", "unexpected exit")

    def test_keeper_error(self):
        h = clean()
        h.log.append("2026-12-01 10:00:05.000 UTC [200] pg_tenure keeper ERROR:  out of memory")
        self.assertFinds(h, "server log", "keeper error")

    # synchronous_commit = off

    def test_async_loses_commits_never_epochs(self):
        h = clean()
        h.calls[0] = [r for r in h.calls[0] if r["op"] != "release"]
        h.issued = [i for i in h.issued if i[1] != E2]
        h.rows["a"] = [r for r in h.rows["a"] if r[1] != E2]
        run = h.run()
        run.meta["async"] = True
        rep = check.check(run)
        self.assertEqual(rep.violations, [])
        self.assertTrue(any("lost" in n for n in rep.notes), rep.notes)
        # a lost epoch issued again is still a violation
        h.call(1, "claim_epoch", "a", 3.0, 3.01, E1)
        run = h.run()
        run.meta["async"] = True
        self.assertTrue(any(v.startswith("[epochs]") for v in check.check(run).violations))

    # rule 6

    def test_vacuous_run(self):
        h = History()
        h.call(0, "renew", "a", 0.0, 0.01, False)
        self.assertFinds(h, "vacuous")


if __name__ == "__main__":
    unittest.main()
