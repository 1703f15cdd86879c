#!/usr/bin/python3
"""Tests of record.py, which reads the issues and releases of a stress run
from test_decoding's output: lines as PostgreSQL 15 writes them.

    python3 test/stress/test_record.py
"""
import datetime
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402

E = 1125899909698995
INSERT = ("table tenure.history: INSERT: lease[text]:'it''s' epoch[bigint]:1125899909698995"
          " holder[text]:'c''1' session_bound[boolean]:false started[timestamp with time zone]:"
          "'2026-12-02 08:48:14.319875+00' ended[timestamp with time zone]:null end_reason[text]:null"
          " boot_id[bigint]:8612402075957726094 issued_sysid[bigint]:7714625811334967924"
          " issued_tli[bigint]:1 open_tli[bigint]:1 base[bigint]:0 ttl[interval]:'00:00:15'")
RELEASE = ("table tenure.history: UPDATE: lease[text]:'it''s' epoch[bigint]:1125899909698995"
           " holder[text]:'c''1' session_bound[boolean]:false started[timestamp with time zone]:"
           "'2026-12-02 08:48:14.319875+00' ended[timestamp with time zone]:"
           "'2026-12-02 08:48:14.320418+00' end_reason[text]:'released'"
           " boot_id[bigint]:8612402075957726094 issued_sysid[bigint]:7714625811334967924"
           " issued_tli[bigint]:1 open_tli[bigint]:1 base[bigint]:0 ttl[interval]:'00:00:15'")
LEASE = ("table tenure.lease: UPDATE: name[text]:'it''s' id[bigint]:1 owner[regrole]:'tenure'"
         " epoch[bigint]:1125899909698995 base[bigint]:0")


def us(text):
    t = datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp()) * 1000000 + t.microsecond


class Decoding(unittest.TestCase):
    def test_commit_time(self):
        self.assertEqual(record.commit_us("COMMIT 726 (at 2026-12-02 08:48:14.32005+00)"),
                         us("2026-12-02 08:48:14.320050"))
        self.assertEqual(record.commit_us("COMMIT (at 2026-12-02 08:48:14+00)"),
                         us("2026-12-02 08:48:14"))
        self.assertIsNone(record.commit_us("BEGIN 726"))
        with self.assertRaises(record.DecodeError):
            record.commit_us("COMMIT 726 (at 2026-12-02 09:48:14.32005+01)")

    def test_rows(self):
        self.assertEqual(record.history_change(INSERT), ("INSERT", "it's", E, "c'1", None))
        self.assertEqual(record.history_change(RELEASE),
                         ("UPDATE", "it's", E, "c'1", "released"))
        self.assertIsNone(record.history_change(LEASE))
        with self.assertRaises(record.DecodeError):
            record.history_change("table tenure.history: INSERT: lease[text]:'x'")

    def test_feed(self):
        rec = record.Recorder()
        rows = [("726", "BEGIN 726"), ("726", LEASE), ("726", INSERT),
                ("726", "COMMIT 726 (at 2026-12-02 08:48:14.32005+00)"),
                ("727", "BEGIN 727"), ("727", RELEASE),
                ("727", "COMMIT 727 (at 2026-12-02 08:48:14.320468+00)")]
        rec.feed(rows)
        # a transaction handed out again after a crash counts once
        rec.feed(rows[4:])
        self.assertEqual(list(rec.issued.values()),
                         [["it's", E, "c'1", us("2026-12-02 08:48:14.320050")]])
        self.assertEqual(list(rec.released.values()),
                         [["it's", E, us("2026-12-02 08:48:14.320468")]])
        # the same epoch inserted by another transaction is another issue
        rec.feed([("900", INSERT), ("900", "COMMIT 900 (at 2026-12-02 08:48:15+00)")])
        self.assertEqual(len(rec.issued), 2)


if __name__ == "__main__":
    unittest.main()
