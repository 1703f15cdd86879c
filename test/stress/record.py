"""What the stress run learns from the WAL: every epoch issued (a row
inserted into tenure.history) and every release (a row of it updated to
end_reason 'released'), each with its transaction's commit timestamp.

The checker needs the commit timestamp of each issue (check.py, rule 4),
which a history row does not keep: ending a tenure updates the row, which
replaces its xmin.  A trigger on tenure.history could record it, but
pg_tenure writes such a table by SQL statements instead of direct access,
and the stress is there to exercise what production runs.  So the run
keeps a logical replication slot with test_decoding (created before the
first lease) and reads it from time to time and at the end:
test_decoding shows each committed transaction's rows and the timestamp of
its commit record, which is the one pg_xact_commit_timestamp() gives the
fenced rows.

A crash or an immediate restart may hand out a transaction again (the
slot's position is saved at checkpoints): records are kept once per
(transaction, lease, epoch).  PostgreSQL 15 keeps no logical slot through
a promotion, so --standby records with triggers instead (stress.py).
"""
import calendar
import re

SLOT = "stress_history"

_TEXT = r"'((?:[^']|'')*)'"
_ROW_RE = re.compile(r"^table tenure\.history: (INSERT|UPDATE): (.*)$")
_LEASE_RE = re.compile(r"\blease\[text\]:" + _TEXT)
_EPOCH_RE = re.compile(r"\bepoch\[bigint\]:(-?\d+)")
_HOLDER_RE = re.compile(r"\bholder\[text\]:" + _TEXT)
_REASON_RE = re.compile(r"\bend_reason\[text\]:(?:null|" + _TEXT + ")")
_COMMIT_RE = re.compile(r"^COMMIT(?: \d+)? \(at (\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)"
                        r"(?:\.(\d{1,6}))?\+00\)$")


class DecodeError(Exception):
    pass


def _text(m):
    return m.group(1).replace("''", "'")


def commit_us(data):
    """The commit timestamp of a COMMIT line (TimeZone UTC) in
    microseconds since 1970, or None if data is not a COMMIT line."""
    m = _COMMIT_RE.match(data)
    if not m:
        if data.startswith("COMMIT"):
            raise DecodeError(f"unexpected COMMIT line: {data!r}")
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    frac = (m.group(7) or "").ljust(6, "0")
    return calendar.timegm((y, mo, d, h, mi, s)) * 1000000 + int(frac)


def history_change(data):
    """(op, lease, epoch, holder, end_reason) of a row of tenure.history
    that data shows, or None for any other line."""
    m = _ROW_RE.match(data)
    if not m:
        return None
    cols = m.group(2)
    lease, epoch = _LEASE_RE.search(cols), _EPOCH_RE.search(cols)
    holder, reason = _HOLDER_RE.search(cols), _REASON_RE.search(cols)
    if not (lease and epoch and holder and reason):
        raise DecodeError(f"a tenure.history row without its columns: {data!r}")
    return (m.group(1), _text(lease), int(epoch.group(1)), _text(holder),
            _text(reason) if reason.group(1) is not None else None)


class Recorder:
    """The issues and releases read from the slot so far."""

    def __init__(self):
        self.issued = {}        # (xid, lease, epoch) -> [lease, epoch, holder, cts]
        self.released = {}      # (xid, lease, epoch) -> [lease, epoch, cts]

    @staticmethod
    def create(srv):
        """Create the slot; before anything is written that it must show."""
        with srv.connect() as c:
            c.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", [SLOT])

    def feed(self, rows):
        """Take rows (xid, data) of pg_logical_slot_get_changes(), in
        order; a transaction's records count at its COMMIT."""
        pending = []
        for xid, data in rows:
            ch = history_change(data)
            if ch is not None:
                pending.append((xid, ch))
                continue
            cts = commit_us(data)
            if cts is None:
                continue
            for x, (op, lease, epoch, holder, reason) in pending:
                key = (int(x), lease, epoch)
                if op == "INSERT":
                    self.issued.setdefault(key, [lease, epoch, holder, cts])
                elif reason == "released":
                    self.released.setdefault(key, [lease, epoch, cts])
            pending = []

    def drain(self, srv):
        """Read what the slot holds now; False if the server could not be
        reached (try again later: the slot keeps it)."""
        import psycopg      # (the parsing above is tested without it)
        try:
            with srv.connect() as c:
                c.execute("SET TimeZone = 'UTC'")
                rows = c.execute(
                    "SELECT xid::text, data FROM pg_logical_slot_get_changes(%s, NULL, NULL,"
                    " 'include-timestamp', '1', 'skip-empty-xacts', '1')", [SLOT]).fetchall()
        except psycopg.Error:
            return False
        self.feed(rows)
        return True
