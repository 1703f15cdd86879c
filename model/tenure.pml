/*
 * tenure.pml
 *		A Promela model of pg_tenure's protocol for one lease: tenures and
 *		the automatic hold-off, the keeper, claims, the fence check and its
 *		lock at PRE_COMMIT, publication of new tenures and epochs in the
 *		COMMIT callback after the commit record, the epoch clock, a
 *		server crash that loses shared memory and unflushed WAL, and
 *		(with -DPROMOTION) the promotion of a standby, with and without the
 *		proof that it replayed every transaction of the old primary and the
 *		list of live tenures its keeper wrote at its clean shutdown.
 *
 * model/README maps every step to the C function that implements it and
 * lists what the model leaves out, and why.  The properties:
 *
 *   HOLDOFF  no two clients believe they lead at once (the client rule,
 *            automatic hold-off), except a client whose acquisition a
 *            crash lost before it was flushed (documented: the bound is
 *            lost with it).  Checked in every state by proctype Holdoff.
 *   FENCE    a fenced write commits only under the latest committed epoch:
 *            tokens of committed writes never decrease in commit order, and
 *            none commits once a newer epoch has committed, or under an
 *            epoch whose transaction never committed (fenced_write).
 *   EPOCH    every committed epoch exceeds every epoch committed before it,
 *            across the crash and the promotion: no epoch is issued twice
 *            (commit_issue).
 *   ENDED    (-DPROMOTION) a tenure that ended on the old primary (expiry,
 *            revocation, a restart) is never live again on the new one: it
 *            does not continue (continue_tenure).
 *
 * Mutants, selected with -D (model/run checks that each one is caught):
 *   NO_FENCE_LOCK   writers and issuers take no fence lock at PRE_COMMIT
 *   PUBLISH_EARLY   new tenures and claims are published at PRE_COMMIT,
 *                   before the commit record
 *   NO_FORCE_SYNC   an issue never forces its commit to be flushed
 *   NO_HOLDOFF      a new tenure is active at once
 * and, with -DPROMOTION:
 *   NO_DEMOTION_BOUND       after a promotion without the proof, a
 *                           successor waits only ready + ttl
 *   CONTINUE_WITHOUT_PROOF  tenures continue after a promotion without
 *                           the proof
 *   CONTINUED_ACTIVE_AT_ONCE  a continued tenure is active at once, also
 *                           when its predecessor's holder may still believe
 *   SYNC_IS_PROOF           a standby that replayed every flushed commit
 *                           counts as proof while the old primary serves on
 *   NO_FINAL_LIST           a tenure continues without being in the list
 *                           of live tenures the old primary's keeper wrote
 *                           at its clean shutdown
 *   LIST_TIME_IGNORED       (with LIST_EARLY) a listed tenure continues
 *                           even if it had less to live than the time from
 *                           the list to the shutdown checkpoint
 * -DNO_ENDED_CHECK leaves ENDED unchecked (for the mutants that continue
 * without the proof, which violate it first).  For model/README's Findings,
 * beyond model/run: -DCRASH_NEW_PRIMARY moves the crash after the
 * promotion, and -DRESTART_FORGETS makes a restart soon after a promotion
 * without the proof drop the demotion bound; -DLIST_EARLY lets backends
 * serve between the keeper's list and the shutdown checkpoint (model/run
 * uses it for LIST_TIME_IGNORED), and -DREFUSE_AFTER_LIST makes them
 * refuse every lease call after the list.
 */

#ifndef NC
#define NC		3			/* clients, holders 0 .. NC-1 (2 or 3) */
#endif
#ifndef OPS0
#define OPS0	3			/* operations of client 0 */
#endif
#ifndef OPS1
#define OPS1	2			/* operations of client 1 */
#endif
#ifndef OPS2
#define OPS2	1			/* operations of client 2 */
#endif
#ifndef OTHERS_WRITE
#define OTHERS_WRITE	false	/* whether the other clients write and release */
#endif
#ifndef TTL
#define TTL		2
#endif
#ifndef TMAX
#define TMAX	4			/* time runs from 0 to TMAX */
#endif
#ifndef DEMOTION
#define DEMOTION	2		/* tenure.demotion_bound: how long an old primary
							 * may go on serving after a promotion */
#endif

#define CLAIMER	NC			/* the claimer's backend; it claims for holder 0 */
#define NOBODY	255

/* TenureState */
#define FREE	0
#define PENDING	1
#define HELD	2

/* What promotion.c found (TenurePromotion) in this run of the server */
#define NONE	0			/* not promoted in this run */
#define KEPT	1			/* the proof: the old primary shut down cleanly */
#define LOST	2			/* no proof: a suffix of its WAL may be missing */

/* tenure_state_reserve() results */
#define BUSY		0
#define RENEWED		1
#define RESERVED	2

#define MAX(a, b)	((a) > (b) -> (a) : (b))

/* ------------------------------------------------------------------ */
/* Time: one clock for server and clients (CLOCK_MONOTONIC, no drift).
 * A tick changes nothing but now, so it commutes with every step that
 * does not read now: instead of a clock process, each step that reads
 * now may first let any amount of time pass (advance()).  Every run with
 * a ticking clock is a run of this model with the ticks moved to the next
 * step that reads the time, which sees the same value. */
byte	now;

inline advance()
{
	do
	:: now < TMAX -> now++
	:: break
	od;
	old_primary_stops()
}

/* An old primary past its last service (o_until), or whose tenure expired
 * in its own memory, answers nothing more: forget it (states that differ
 * only in what it forgot are merged). */
inline old_primary_stops()
{
#ifdef PROMOTION
	if
	:: o_holder != NOBODY && (now >= o_until || now >= o_renewed + TTL) ->
		o_holder = NOBODY;
		o_renewed = 0;
		o_active = 0;
		o_until = 0
	:: else
	fi
#else
	skip
#endif
}

/* advance(), but not to time u or later */
inline advance_before(u)
{
	do
	:: now < TMAX && now + 1 < (u) -> now++
	:: break
	od
}

/* ------------------------------------------------------------------ */
/* Shared memory: the lease's entry (state.c, TenureLease) and the epoch
 * clock (TenureShared.clock_*).  Lost in a crash. */
bool	loaded;				/* the entry exists */
byte	st;					/* FREE, PENDING or HELD */
byte	holder = NOBODY;	/* holder name */
byte	pend_be = NOBODY;	/* backend of the PENDING acquisition */
byte	epoch;				/* latest published epoch */
byte	pend_epoch;
bool	committing;			/* past its PRE_COMMIT check */
byte	acquired;			/* acquired_mono */
byte	renewed;			/* renewed_mono */
byte	active_at;			/* active_mono */
byte	pred;				/* pred_expiry_mono: the hold-off bound */
bool	lock_wanted;		/* the keeper's advisory lock */
bool	lock_held;
byte	ready;				/* ready_mono: when the server became ready */
bool	clk_started;		/* clock_tli != 0 */
byte	clk_last;			/* clock_last */

/* Heavyweight locks (the lock table is shared memory too).  A fenced
 * writer's RowExclusiveLock is held only inside its one atomic step (see
 * fenced_write), so it shows as no variable. */
byte	fl_ex;				/* the fence lock's ExclusiveLock: backend + 1 */
byte	rowlock;			/* tenure.lease row lock: backend + 1 */

/* ------------------------------------------------------------------ */
/* WAL and tables.  The clock of WAL position p is C(p) = p: every record
 * is one unit long. */
byte	ins;				/* insert position */
byte	flushed;			/* flush position */
byte	row_epoch;			/* tenure.lease.epoch, as the WAL has it */
byte	row_vis;			/* ... as the latest snapshot sees it */
bool	hist_open;			/* latest tenure.history row open (WAL) */
byte	row_epoch_d;		/* ... as of the flushed WAL */
bool	hist_open_d;
byte	gen;				/* server generation: a crash or promotion starts
							 * the next */

#ifdef PROMOTION
/* The latest tenure.history row, beyond "is it open" (WAL, and as of the
 * flushed WAL): its holder, and whether its tenure was surely active at
 * once (catalog.c, tenure_carry_chain()): back from it through releases
 * (and claims, the same tenure), the history ends, or reaches a tenure that
 * expired.  A release keeps the released tenure's value for the next. */
byte	hist_holder = NOBODY;
bool	hist_pok;
byte	hist_holder_d = NOBODY;
bool	hist_pok_d;
/* Not WAL but how the rows read in this run: the latest row is open from
 * an earlier run (its boot_id) and did not continue; the lease's latest
 * epoch was issued on an earlier timeline (or never, after a promotion:
 * tenure.lease.issued_tli). */
bool	hist_stale;
bool	tl_old;
/* The standby: the tables as it replayed them, always some earlier flushed
 * state of the primary's (walsender sends flushed WAL only). */
byte	row_epoch_r;
bool	hist_open_r;
byte	hist_holder_r = NOBODY;
bool	hist_pok_r;
/* promotion.c's finding in this run of the server */
byte	promo;
/* The time of the promotion that began the timeline, plus one (0: none):
 * its end-of-recovery record, which a restart of the new primary reads
 * (promotion.c, tenure_promotion_recent()). */
byte	promo_at;
/* Shared memory: how the lease's last tenure ended (tenure_state_ended()):
 * early (revoked, session ended) rather than expired or released. */
bool	ended_bad;
/* The keeper's list of live tenures, written into the WAL at the old
 * primary's clean shutdown, before its shutdown checkpoint: the epoch of the
 * lease's tenure if it was held and not expired then, else 0. */
byte	list_epoch;
#ifdef LIST_EARLY
byte	list_until;			/* its expiry when the list was written */
#endif
/* -DLIST_EARLY: the keeper wrote its list and exited, while backends may
 * still serve until the shutdown checkpoint (a fast shutdown). */
bool	shutting;
/* Ghost (ENDED): the tenure of the latest history row ended on the old
 * primary (expiry, early end, a restart), whether or not the row says so
 * yet. */
bool	hist_dead;
/* The old primary after a promotion without the proof: what its shared
 * memory says of the tenure it had, and until when it serves renew and
 * leader_is (the promotion plus DEMOTION; 0: it serves nothing). */
byte	o_holder = NOBODY;
byte	o_renewed;
byte	o_active;
byte	o_until;
#endif

/* ------------------------------------------------------------------ */
/* Ghost state of the properties. */
byte	committed_max;		/* largest epoch whose transaction committed */
byte	last_write;			/* token of the latest committed fenced write */
bool	believe[NC];		/* leader_is said yes in the current tenure */
byte	lastsent[NC];		/* when the last successful acquire/renew was sent */
bool	acq_unflushed[NC];	/* the latest acquisition's commit is not flushed */
bool	lost[NC];			/* a crash lost that acquisition */
bool	ended_early;

#define LIVE(t)		(st == HELD && (t) < renewed + TTL)
#define MINE(b)		(st == PENDING && pend_be == (b))
#define BEL(i)		(believe[i] && now < lastsent[i] + TTL && !lost[i])
#ifdef PROMOTION
#define OLD_SERVES(i)	(o_holder == (i) && now < o_until)
#define EARLY_END()		ended_bad = true
/* a tenure ends on the old primary, before the promotion (ghost, ENDED) */
#define ENDED_ON_OLD(c) \
	if \
	:: (c) && promo == NONE -> hist_dead = true \
	:: else \
	fi
#else
#define EARLY_END()		skip
#endif
/* -DLIST_EARLY: the old primary's keeper is gone once it wrote its list;
 * -DREFUSE_AFTER_LIST: then no lease call is served either */
#ifdef PROMOTION
#define KEEPER_RUNS		(!shutting)
#else
#define KEEPER_RUNS		true
#endif
#if defined(PROMOTION) && defined(REFUSE_AFTER_LIST)
#define SERVES			(!shutting)
#else
#define SERVES			true
#endif

#ifdef NO_FENCE_LOCK
#define FENCE_FREE			true
#define TAKE_FENCE(b)		skip
#else
#define FENCE_FREE			(fl_ex == 0)
#define TAKE_FENCE(b)		fl_ex = (b) + 1
#endif

#ifdef NO_FORCE_SYNC
#define MUST_SYNC(n)	false
#else
#define MUST_SYNC(n)	(n)
#endif

/* Everything inserted is flushed, and the tables' state with it. */
inline flush_now()
{
	flushed = ins;
	acq_unflushed[0] = false;
	acq_unflushed[1] = false;
#if NC > 2
	acq_unflushed[2] = false;
#endif
	row_epoch_d = row_epoch;
	hist_open_d = hist_open
#ifdef PROMOTION
	;
	hist_holder_d = hist_holder;
	hist_pok_d = hist_pok
#endif
}

/* state.c, tenure_end() */
inline tenure_end(released)
{
	if
	:: !released -> pred = MAX(pred, renewed + TTL)
	:: else
	fi;
	st = FREE;
	holder = NOBODY;
	lock_wanted = false
#ifdef PROMOTION
	;
	ended_bad = false;
	ENDED_ON_OLD(!released)
#endif
}

/* state.c, tenure_unreserve() */
inline unreserve()
{
	st = FREE;
	holder = NOBODY;
	pend_be = NOBODY;
	pend_epoch = 0;
	committing = false;
	lock_wanted = false
}

/* state.c, tenure_state_publish_acquire() */
inline publish_acquire(b)
{
	if
	:: loaded && MINE(b) ->
		st = HELD;
		pend_be = NOBODY;
		committing = false;
		lock_wanted = true;
		epoch = MAX(epoch, pend_epoch);
		pend_epoch = 0
	:: else
	fi
}

/* state.c, tenure_state_publish_claim() */
inline publish_claim(e)
{
	if
	:: loaded -> epoch = MAX(epoch, e)
	:: else
	fi
}

/* epoch.c, tenure_issue_epoch(), under the row lock: the epoch is
 * max(stored + 1, base + R, floor + 1) with base 0 and floor the epoch
 * shared memory has seen (tenure_state_cached_epoch()); R is drawn from
 * the clock (tenure_clock_draw(): C(insert) + 1 at the first draw
 * after a start, else one more than the largest value used); then the
 * UPDATE record is inserted and R recorded (tenure_clock_used()). */
inline issue_epoch(e, R)
{
	if
	:: !clk_started -> clk_started = true; clk_last = ins
	:: else
	fi;
	R = clk_last + 1;
	e = MAX(row_epoch + 1, R);
	if
	:: loaded && epoch >= e -> e = epoch + 1
	:: else
	fi;
	ins++;
	clk_last = MAX(clk_last, R)
}

/* The commit of a transaction that issued epoch e, in CommitTransaction's
 * order: the commit record (RecordTransactionCommit), flushed if the
 * commit is synchronous or ForceSyncCommit() was called (R beyond the
 * flushed WAL), then visibility (ProcArrayEndTransaction), from which on
 * the epoch counts as issued.  A crash before the flush leaves no trace
 * of the record, as if it had come before the record: one step. */
inline commit_issue(e, needsync)
{
	ins++;
	row_epoch = e;
	hist_open = true;
	if
	:: MUST_SYNC(needsync) -> flush_now()
	:: else ->
		if
		:: flush_now()				/* synchronous_commit = on */
		:: skip						/* synchronous_commit = off */
		fi
	fi;
	assert(e > committed_max);		/* EPOCH */
	committed_max = e;
	row_vis = e
#ifdef PROMOTION
	;
	hist_stale = false;				/* the new row is this run's */
	tl_old = false;					/* issued on this timeline */
	ended_bad = false;				/* read only once this tenure ends */
	hist_dead = false				/* a live tenure (a claim: the same) */
#endif
}

#ifdef PROMOTION
/* history_rows.c, tenure_history_close() and tenure_history_start() in an
 * acquisition by holder i, before its commit: the predecessor's row is
 * closed with the end shared memory saw (release closed it already as
 * "released"; one open from an earlier run closes as "restarted" or
 * "promoted"), and the new row names i.  Whether the new tenure was surely
 * active at once follows catalog.c, tenure_carry_chain(): no predecessor;
 * one that expired; or one released (the only other way a row closes in
 * the model), and then whatever held for the released tenure, back
 * through releases to the first tenure that ended otherwise. */
#define PRED_OK	(row_epoch == 0 || (!hist_open && hist_pok) || \
				 (hist_open && !hist_stale && !ended_bad))

inline history_acquire(i)
{
	hist_pok = PRED_OK;
	hist_holder = i
}

/* The row a release closes: nothing reads its holder any more (only an
 * open row continues), so it is cleared, which merges states that differ
 * only there; hist_pok stays, for the chain of the next tenure. */
inline history_release()
{
	hist_holder = NOBODY;
	hist_stale = false
}
#else
#define history_acquire(i)	skip
#define history_release()	skip
#endif

/* The end of an issuing transaction by backend b: release its locks
 * (after the COMMIT callbacks) or, on abort, give its reservation back
 * (tenure_txn_cancel()). */
inline end_issue(b)
{
	if
	:: fl_ex == (b) + 1 -> fl_ex = 0
	:: else
	fi;
	if
	:: rowlock == (b) + 1 -> rowlock = 0
	:: else
	fi;
	if
	:: MINE(b) -> unreserve()
	:: else
	fi
}

/* ------------------------------------------------------------------ */
/* Loading the lease's entry (catalog.c, tenure_ensure_entry(),
 * tenure_load_committed(), tenure_carry_of(); state.c, tenure_state_load()):
 * a new entry follows the committed row and applies what the rows carry
 * over from before the server became ready (TenureCarry).  Every load the
 * model makes is the entry's first in its run of the server: entries are
 * never evicted. */
#ifdef PROMOTION
#ifdef CONTINUE_WITHOUT_PROOF
#define CONT_PROMO	(promo != NONE)
#else
#define CONT_PROMO	(promo == KEPT)
#endif
#ifdef NO_DEMOTION_BOUND
#define DEMOTION_ADD	0
#else
#define DEMOTION_ADD	DEMOTION
#endif
/* catalog.c, tenure_carry_of(), TENURE_PROMOTION_NONE: not promoted in
 * this run, but ready less than DEMOTION after the promotion that began
 * the timeline: every lease loaded gets the bound (src/README, P3) */
#ifdef RESTART_FORGETS
#define RESTART_SOON	false
#else
#define RESTART_SOON	(promo == NONE && promo_at != 0 && \
						 ready + 1 < promo_at + DEMOTION)
#endif

/* The old primary's final list (promotion.c, walking back from its
 * shutdown checkpoint to the list its keeper wrote) names the tenure of
 * the latest row: its epoch, which is the lease's latest.  A promotion
 * without the proof has no list.  The mutants that continue without the
 * proof have none either, and continue without it. */
#if defined(NO_FINAL_LIST) || defined(CONTINUE_WITHOUT_PROOF) || \
	defined(SYNC_IS_PROOF)
#define LISTED		true
#else
#define LISTED		(list_epoch != 0 && list_epoch == row_epoch)
#endif

/* TENURE_CARRY_CONTINUED (src/README, P2): promoted in this run with the
 * proof, the latest row open, its epoch the lease's latest and issued on
 * the timeline the promotion left (open_tli: the model has one promotion),
 * and the tenure in the old primary's final list.  Tenures are not
 * session-bound in the model (the keeper's early end stands for a
 * session's exit). */
#define CONTINUES	(CONT_PROMO && hist_open && tl_old && LISTED)

/* state.c, tenure_continue(): the same holder and epoch, renewed when the
 * server became ready, active at once only if the tenure surely was on the
 * old primary, else from ready plus its hold-off (the ttl). */
inline continue_tenure()
{
#ifndef NO_ENDED_CHECK
	assert(!hist_dead);				/* ENDED */
#endif
	st = HELD;
	holder = hist_holder;
	acquired = ready;
	renewed = ready;
#ifndef CONTINUED_ACTIVE_AT_ONCE
	active_at = (hist_pok -> ready : ready + TTL);
#else
	active_at = ready;
#endif
	pred = 0;
	lock_wanted = true;
	hist_stale = false				/* its row becomes this run's */
}
#endif

inline load_entry()
{
	loaded = true;
	epoch = MAX(epoch, row_vis);
#ifndef PROMOTION
	/* TENURE_CARRY_RESTART: a tenure open when the server went down */
	if
	:: gen > 0 && hist_open -> pred = ready + TTL
	:: else
	fi
#else
	if
	:: CONTINUES -> continue_tenure()
	:: !CONTINUES && (hist_stale || tl_old || RESTART_SOON) ->
		/* TENURE_CARRY_RESTART (H2), or after a promotion without the
		 * proof TENURE_CARRY_PROMOTED (P3): the old primary may serve on;
		 * also after a restart of the new primary less than DEMOTION
		 * after the promotion, whatever the lease carried */
		pred = ready + TTL + (promo == LOST || RESTART_SOON -> DEMOTION_ADD : 0)
	:: else
	fi;
	/* nothing reads the list or the ghost after the new primary's first
	 * load: clearing them merges states */
	if
	:: promo != NONE -> list_epoch = 0; hist_dead = false
	:: else
	fi
#endif
}

/* catalog.c, tenure_ensure_continued(): after a promotion with the proof,
 * renew (here acquire), leader_is and a fenced statement load the entry of
 * a tenure that continues (lease.c, fence.c).  The history writer's load
 * (history.c) builds the same entry whenever it runs, and is left out. */
inline ensure_continued()
{
#ifdef PROMOTION
	if
	:: !loaded && CONTINUES -> load_entry()
	:: else
	fi
#else
	skip
#endif
}

/* A fenced write with token tk (fence.c, tenure_fence_precommit()): at
 * PRE_COMMIT the writer takes RowExclusiveLock on the fence lock, checks
 * the lease's live tenure and epoch, commits, and releases the lock after
 * its COMMIT callbacks.  That lock excludes every step of an issuer that
 * holds ExclusiveLock (commit, publication), so the whole critical
 * section is one step; without the lock (NO_FENCE_LOCK) the check and
 * the commit are two.  The check when the statement runs is left out: it
 * can only make a write fail sooner. */
#define FENCE_PASSES(tk)	(loaded && LIVE(now) && epoch == (tk))

inline commit_write(tk)
{
	assert(tk >= last_write);		/* FENCE: commit order */
	assert(tk == committed_max);	/* FENCE: the latest committed epoch */
	last_write = tk;
	ins++
}

inline fenced_write(guard, cnt, tk, ok)
{
#ifndef NO_FENCE_LOCK
	atomic {
		guard && FENCE_FREE -> cnt++;
		advance();
		ensure_continued();
		if
		:: FENCE_PASSES(tk) -> commit_write(tk)
		:: else							/* TN002: it aborts */
		fi
	}
#else
	atomic {
		guard -> cnt++; mygen = gen; advance();
		ensure_continued();
		ok = FENCE_PASSES(tk)
	};
	atomic {
		if
		:: ok && gen == mygen -> commit_write(tk)
		:: else
		fi;
		ok = false
	}
#endif
}

/* ------------------------------------------------------------------ */
/* A client: holder i in its own backend i, a campaign loop.  It may act
 * as leader once leader_is() said yes, until it sent its last successful
 * acquire or renew plus the ttl (README, The client rule).  Its token is
 * the epoch its latest acquire returned; it may write with it after it
 * lost the lease (a stale leader). */
proctype Client(byte i; byte nops; bool writer)
{
	byte	ops, mygen, sent, e, R, tk, r;
	bool	has_tk, needsync, ok;

	do
	/* acquire(): acquire.c, tenure_acquire_lease().  The client sent the
	 * call at the latest when the server reads its clock: that is when its
	 * belief may last longest. */
	:: atomic {
				ops < nops && SERVES -> ops++;
				mygen = gen;
				advance();
				sent = now;
				/* the entry follows the committed row (tenure_ensure_entry) */
				if
				:: !loaded -> load_entry()
				:: else
				fi;
				/* tenure_state_reserve() */
				if
				:: st == HELD && !LIVE(now) -> tenure_end(false)
				:: else
				fi;
				if
				:: st == PENDING && !committing && now >= acquired + TTL &&
				   pend_be != i -> unreserve()
				:: else
				fi;
				if
				:: st != FREE ->
					if
					:: holder == i && LIVE(now) ->
						/* held already: renewed, same epoch */
						renewed = MAX(renewed, now);
						tk = epoch;
						has_tk = true;
						lastsent[i] = now;
						r = RENEWED
					:: else -> r = BUSY
					fi
				:: else ->
					st = PENDING;
					holder = i;
					pend_be = i;
					pend_epoch = 0;
					committing = false;
					acquired = now;
					renewed = now;
#ifndef NO_HOLDOFF
					active_at = MAX(now, pred);
#else
					active_at = now;
#endif
					lock_wanted = true;
					r = RESERVED
				fi
			};
			{
				if
				:: r != RESERVED -> r = 0
				:: else ->
					/* the keeper's answer (tenure_wait_for_lock), the row
					 * lock, the epoch (tenure_issue_epoch()) and whether
					 * it needs ForceSyncCommit(); tenure_state_issued();
					 * at PRE_COMMIT tenure_txn_check_reservation() and the
					 * fence lock in ExclusiveLock mode
					 * (tenure_fence_precommit()); then a later PRE_COMMIT
					 * step may still fail (another module's callback,
					 * PreCommit_Notify, a serialization failure), or the
					 * transaction commits.  One step: see model/README. */
					atomic {
						(lock_held && rowlock == 0 && FENCE_FREE) || !MINE(i) ->
						advance();
						if
						:: MINE(i) && now < acquired + TTL ->
							rowlock = i + 1;
							issue_epoch(e, R);
							needsync = (R > flushed);
							pend_epoch = e;
							committing = true;
							TAKE_FENCE(i);
#ifdef PUBLISH_EARLY
							publish_acquire(i);
#endif
							if
							:: goto acq_abort
							:: history_acquire(i);
								commit_issue(e, needsync);
								acq_unflushed[i] = (flushed < ins)
							fi
						:: else -> goto acq_abort
						fi
					};
					/* XACT_EVENT_COMMIT: tenure_txn_publish(); then the locks
					 * are released and acquire() has returned e */
					atomic {
#ifndef PUBLISH_EARLY
						publish_acquire(i);
#endif
						end_issue(i);
						tk = e;
						has_tk = true;
						lastsent[i] = sent;
						believe[i] = false;
						lost[i] = false;
						e = 0; R = 0; needsync = false; r = 0; sent = 0
					};
					goto acq_done;
acq_abort:
					/* XACT_EVENT_ABORT */
					atomic { end_issue(i); e = 0; R = 0; needsync = false; r = 0; sent = 0 };
acq_done:
					skip
				fi
			} unless { gen != mygen }

	/* leader_is(): state.c, tenure_state_leads(); asked once an acquire
	 * returned an epoch (before, it cannot say yes) */
	:: atomic {
				ops < nops && has_tk && SERVES -> ops++;
				advance();
				ensure_continued();
				if
				:: loaded && holder == i && LIVE(now) && now >= active_at ->
					believe[i] = true
				:: else
				fi
			}

#ifdef PROMOTION
	/* After a promotion without the proof, the old primary may go on
	 * serving its holder until o_until: renew (no WAL) and leader_is from
	 * its own shared memory (state.c, tenure_state_renew() and
	 * tenure_state_leads() there).  The client sends at the latest when
	 * the old primary reads its clock. */
	:: atomic {
				ops < nops && has_tk && OLD_SERVES(i) -> ops++;
				advance_before(o_until);
				if
				:: now < o_renewed + TTL ->
					o_renewed = now;
					lastsent[i] = now
				:: else
				fi
			}
	:: atomic {
				ops < nops && has_tk && OLD_SERVES(i) -> ops++;
				advance_before(o_until);
				if
				:: now < o_renewed + TTL && now >= o_active -> believe[i] = true
				:: else
				fi
			}
#endif

	/* a fenced write under the client's token */
	:: fenced_write(ops < nops && has_tk && writer && SERVES, ops, tk, ok)

		/* release(): lease.c, pg_tenure_release(): the row lock and
		 * tenure_state_held_epoch(); at COMMIT the history row is closed
		 * and tenure_state_publish_release() ends the tenure.  The client
		 * stops acting first. */
	:: atomic {
				ops < nops && has_tk && writer && rowlock == 0 && SERVES -> ops++;
				believe[i] = false;
				mygen = gen;
				rowlock = i + 1
			};
			{
				atomic {
					advance();
					if
					:: holder == i && LIVE(now) ->
						ins++;
						hist_open = false;
						history_release();
						if
						:: flush_now()
						:: skip
						fi;
						if
						:: st == HELD -> tenure_end(true)
						:: else
						fi
					:: else
					fi;
					rowlock = 0
				}
			} unless { gen != mygen }
	:: ops == nops -> break
	od
}

/* ------------------------------------------------------------------ */
/* The claimer: a second backend of holder 0 (a restarted writer) claims a
 * new epoch while holder 0 holds the lease (lease.c, pg_tenure_claim_epoch).
 * Client 0 learns the claimed epoch through acquire's renewal. */
active proctype Claimer()
{
	byte	mygen, e, R;
	bool	needsync;

	/* tenure_holds(), the row lock, tenure_holds() again (a claim that
	 * fails between the two checks only uses up a clock value),
	 * tenure_issue_epoch(), the fence lock at PRE_COMMIT; then a later
	 * PRE_COMMIT step fails, or the claim commits */
end_idle:
	atomic {
		loaded && holder == 0 && LIVE(now) && rowlock == 0 && FENCE_FREE &&
		SERVES ->
		mygen = gen;
		rowlock = CLAIMER + 1;
		issue_epoch(e, R);
		needsync = (R > flushed);
		TAKE_FENCE(CLAIMER);
#ifdef PUBLISH_EARLY
		publish_claim(e);
#endif
		if
		:: end_issue(CLAIMER); goto claim_done
		:: commit_issue(e, needsync)
		fi
	};
	{
		atomic {
#ifndef PUBLISH_EARLY
			publish_claim(e);
#endif
			end_issue(CLAIMER)
		}
	} unless { gen != mygen };
claim_done:
	skip
}

/* ------------------------------------------------------------------ */
/* The keeper (keeper.c; state_keeper.c, tenure_keeper_tend()): takes the
 * advisory lock a reservation wants, lets go of one nobody wants, ends
 * expired tenures; and, once, a live tenure ends early, as a revocation or
 * the exit of a session-bound holder's backend ends it (hold-off kept). */
active proctype Keeper()
{
end:
	do
	:: atomic { KEEPER_RUNS && lock_wanted && !lock_held -> lock_held = true }
	:: atomic { KEEPER_RUNS && lock_held && !lock_wanted -> lock_held = false }
	:: atomic {
			KEEPER_RUNS && st == HELD && renewed + TTL <= TMAX ->
			do
			:: now < renewed + TTL -> now++
			:: else -> break
			od;
			tenure_end(false)
		}
#ifndef NO_EARLY_END
	:: atomic {
			KEEPER_RUNS && !ended_early && LIVE(now) ->
			tenure_end(false);
			EARLY_END();
			ended_early = true
		}
#endif
	od
}

/* The WAL writer, and the flushes of commits the model leaves out. */
active proctype WalWriter()
{
end:
	do
	:: atomic { flushed < ins -> flush_now() }
	od
}

/* A new run of the server (after a crash or a promotion): shared memory,
 * the lock table and every open transaction are gone, the tables are what
 * the WAL it starts from says, the epoch clock restarts (epoch.c,
 * tenure_epoch_shmem_init()), and the server is ready at once (the
 * earliest, hence weakest, ready_mono). */
inline server_start()
{
	gen++;
	loaded = false;
	st = FREE;
	holder = NOBODY;
	pend_be = NOBODY;
	epoch = 0;
	pend_epoch = 0;
	committing = false;
	acquired = 0;
	renewed = 0;
	active_at = 0;
	pred = 0;
	lock_wanted = false;
	lock_held = false;
	clk_started = false;
	clk_last = 0;
	fl_ex = 0;
	rowlock = 0;
	row_vis = row_epoch;
#ifdef PROMOTION
	hist_stale = hist_open;			/* its boot_id is an earlier run's */
	ended_bad = false;
	shutting = false;
#endif
	ready = now
}

/* A crash (PANIC, SIGKILL): WAL beyond the flush position is gone, so the
 * tables go back to their last flushed state, and a commit whose record
 * was flushed counts, seen or not.  With -DPROMOTION it crashes the old
 * primary, before the promotion: the tenure it held ends, and its history
 * row stays open until the lease's next tenure closes it (the history
 * writer, which would close it sooner, is left out).  -DCRASH_NEW_PRIMARY
 * crashes the new primary instead, after the promotion (model/README,
 * Findings). */
#ifndef PROMOTION
#define CRASH_WHEN	true
#elif defined(CRASH_NEW_PRIMARY)
#define CRASH_WHEN	(promo != NONE)
#else
#define CRASH_WHEN	(promo == NONE)
#endif

active proctype Crash()
{
	byte	k;

#ifndef NO_CRASH
end_crash:
	atomic {
		CRASH_WHEN ->
		for (k : 0 .. NC - 1) {
			if
			:: acq_unflushed[k] -> lost[k] = true
			:: else
			fi
		}
		k = 0;
		ins = flushed;
		row_epoch = row_epoch_d;
		hist_open = hist_open_d;
		committed_max = MAX(committed_max, row_epoch_d);
#ifdef PROMOTION
		hist_holder = hist_holder_d;
		hist_pok = hist_pok_d;
		ENDED_ON_OLD(hist_open);	/* the restart ends its tenure */
		list_epoch = 0;				/* a list of an earlier run counts not */
#ifdef LIST_EARLY
		list_until = 0;
#endif
		promo = NONE;				/* promotion.c: not promoted in this run */
#endif
		server_start()
	}
#endif
}

#ifdef PROMOTION
/* The standby's replay (walsender, walreceiver, the startup process): it
 * receives the primary's flushed WAL and replays it at its own pace, so
 * its tables are always some earlier flushed state of the primary's. */
active proctype Standby()
{
end:
	do
	:: atomic {
			promo == NONE &&
			(row_epoch_r != row_epoch_d || hist_open_r != hist_open_d ||
			 hist_holder_r != hist_holder_d || hist_pok_r != hist_pok_d) ->
			row_epoch_r = row_epoch_d;
			hist_open_r = hist_open_d;
			hist_holder_r = hist_holder_d;
			hist_pok_r = hist_pok_d
		}
	od
}

/* After a promotion without the proof, the old primary keeps its shared
 * memory and serves the holder of a live tenure for DEMOTION more, until
 * the HA manager stops it (tenure.demotion_bound bounds that time). */
inline old_primary_serves()
{
	if
	:: LIVE(now) ->
		o_holder = holder;
		o_renewed = renewed;
		o_active = active_at;
		o_until = now + DEMOTION
	:: else
	fi
}

/* keeper.c, on SIGTERM at a clean shutdown: the list of the tenures live
 * in shared memory (held, not expired: it reads the clock), one WAL
 * record.  A tenure that expired and that nobody ended yet is not in it;
 * it ended (ENDED). */
inline write_list()
{
	advance();
	if
	:: st == HELD && LIVE(now) -> list_epoch = epoch
	:: else -> list_epoch = 0
	fi;
#ifdef LIST_EARLY
	list_until = (list_epoch != 0 -> renewed + TTL : 0);
#endif
	ENDED_ON_OLD(st == HELD && !LIVE(now));	/* expired, not ended yet */
	ins++
}

/* promotion.c: a listed tenure counts only if it had more to live than the
 * time from the list to the shutdown checkpoint (src/README, P5); with
 * the list and the checkpoint one step, every listed tenure does. */
inline list_checkpoint()
{
#if defined(LIST_EARLY) && !defined(LIST_TIME_IGNORED)
	advance();
	if
	:: now >= list_until -> list_epoch = 0
	:: else
	fi;
	list_until = 0
#else
	skip
#endif
}

#ifdef LIST_EARLY
#define KEPT_OK		shutting
#else
#define KEPT_OK		true
#endif

/* The promotion of the standby, once, between transactions: no issuer
 * between its commit and its publication, no release under way (those
 * steps touch only the old primary's memory and their own client, and
 * commute with the promotion).  The keeper's first start
 * (tenure_promotion_examine()) finds one of:
 *   KEPT  the old primary shut down cleanly: every commit flushed and
 *         replayed, no transaction after its shutdown checkpoint, and it
 *         serves nothing more.  Before the checkpoint its keeper, exiting,
 *         wrote the list of the tenures live in its shared memory (held
 *         and not expired: it reads the clock); the shutdown is one step
 *         (model/README);
 *   LOST  no such proof: the standby's tables are some earlier flushed
 *         state (a suffix of committed acquisitions, claims and releases
 *         is missing), and the old primary may serve on for DEMOTION.
 * The new timeline's clock values exceed the old one's (E1: the timeline
 * is in the high bits), which the model shows by going on from the old
 * primary's insert position; its WAL starts flushed. */
active proctype Promotion()
{
#ifdef LIST_EARLY
	/* The keeper writes its list and exits; backends may still serve
	 * until the shutdown checkpoint, as in a fast shutdown, unless
	 * -DREFUSE_AFTER_LIST (model/README, Findings) */
	if
	:: atomic { write_list(); shutting = true }
	:: skip
	fi;
#endif
	atomic {
		fl_ex == 0 && rowlock == 0 ->
		if
		:: KEPT_OK ->
#ifndef LIST_EARLY
			write_list();			/* keeper.c: the list, one WAL record */
#endif
			list_checkpoint();
			promo = KEPT;
			flush_now()				/* the shutdown checkpoint */
#ifdef SYNC_IS_PROOF
			/* the standby replayed every flushed commit (synchronous
			 * replication), but the old primary was not shut down */
			;
			old_primary_serves()
#endif
		:: promo = LOST;
			old_primary_serves();
			row_epoch = row_epoch_r;
			hist_open = hist_open_r;
			hist_holder = hist_holder_r;
			hist_pok = hist_pok_r
		fi;
		flushed = ins;
		row_epoch_d = row_epoch;
		hist_open_d = hist_open;
		hist_holder_d = hist_holder;
		hist_pok_d = hist_pok;
		acq_unflushed[0] = false;
		acq_unflushed[1] = false;
#if NC > 2
		acq_unflushed[2] = false;
#endif
		/* nothing reads the replay any more */
		row_epoch_r = 0;
		hist_open_r = false;
		hist_holder_r = NOBODY;
		hist_pok_r = false;
		tl_old = true;
		promo_at = now + 1;
		server_start()
	}
}
#endif

/* HOLDOFF, in every reachable state. */
active proctype Holdoff()
{
end:
	atomic {
		((BEL(0) && BEL(1))
#if NC > 2
		 || (BEL(0) && BEL(2)) || (BEL(1) && BEL(2))
#endif
		) -> assert(false)
	}
}

init
{
	byte	k;

	atomic {
		run Client(0, OPS0, true);
		run Client(1, OPS1, OTHERS_WRITE);
#if NC > 2
		run Client(2, OPS2, OTHERS_WRITE);
#endif
		k = 0
	}
}
