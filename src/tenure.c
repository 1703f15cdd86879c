/*-------------------------------------------------------------------------
 *
 * tenure.c
 *		Module entry point of pg_tenure: settings, shared memory hooks, the
 *		object access and utility hooks, and registration of the keeper
 *		worker and the transaction callbacks.
 *
 * pg_tenure must be loaded through shared_preload_libraries: its lease
 * table lives in shared memory and its keeper worker holds the advisory
 * locks of live tenures.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/objectaccess.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/guc.h"

#include "pg_tenure.h"
#include "state.h"
#include "txn.h"
#include "objects.h"
#include "catalog.h"
#include "epoch.h"
#include "fence.h"
#include "keeper.h"
#include "promotion.h"

PG_MODULE_MAGIC;

/* settings */
int			tenure_max_leases = 1024;
int			tenure_role_share = 50;
int			tenure_database_share = 75;
int			tenure_history_per_lease = 1000;
bool		tenure_notify_enabled = true;
bool		tenure_log_transitions = true;
int			tenure_claim_timeout = 10000;
int			tenure_demotion_bound = 20000;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static object_access_hook_type prev_object_access_hook = NULL;
static ProcessUtility_hook_type prev_ProcessUtility_hook = NULL;

void		_PG_init(void);

/*
 * Ask for our shared memory (the lease table, state.c; the epoch clock,
 * epoch.c; what a promotion kept, promotion.c) and LWLock tranche.
 */
static void
tenure_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();

	RequestAddinShmemSpace(tenure_shmem_size());
	RequestAddinShmemSpace(tenure_epoch_shmem_size());
	RequestAddinShmemSpace(tenure_promotion_shmem_size());
	RequestNamedLWLockTranche("pg_tenure", 1);
}

/*
 * Create or attach to our shared memory.
 */
static void
tenure_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	tenure_shmem_init();
	tenure_epoch_shmem_init();
	tenure_promotion_shmem_init();
}

/*
 * Object access hook: a transaction that drops pg_tenure from this
 * database, or drops a database, ends that database's tenures in shared
 * memory when it commits (txn.c).  Only called just before the object is
 * deleted, so the extension can still be looked up by name.
 */
static void
tenure_object_access(ObjectAccessType access, Oid classId, Oid objectId,
					 int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (access != OAT_DROP || !tenure_state_attached())
		return;
	if (classId == DatabaseRelationId)
		tenure_txn_drop_database_leases(objectId);
	else if (classId == ExtensionRelationId &&
			 objectId == get_extension_oid("pg_tenure", true))
		tenure_txn_drop_database_leases(MyDatabaseId);
}

/*
 * Utility hook: LISTEN tenure makes transactions of this database send
 * their notifications (state_notify.c, tenure_state_listening()).  Only the
 * statement's tag is looked at otherwise.
 */
static void
tenure_process_utility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;
	bool		counted;

	if (IsA(stmt, ListenStmt) &&
		strcmp(((ListenStmt *) stmt)->conditionname, "tenure") == 0 &&
		tenure_state_attached())
		tenure_state_listening();

	/* what DDL runs on rows presents no token (fence.c) */
	counted = tenure_fence_utility_begin(stmt);
	if (prev_ProcessUtility_hook)
		prev_ProcessUtility_hook(pstmt, queryString, readOnlyTree, context,
								 params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
	tenure_fence_utility_end(counted);
}

/*
 * Module load callback.
 */
void
_PG_init(void)
{
	if (IsBinaryUpgrade)
		return;

	/*
	 * Before defining settings: tenure.max_leases is a postmaster setting,
	 * which cannot be defined once the server runs.
	 */
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_tenure must be loaded via shared_preload_libraries"),
				 errhint("Add pg_tenure to shared_preload_libraries in postgresql.conf and restart the server.")));

	DefineCustomIntVariable("tenure.max_leases",
							"Maximum number of leases held in shared memory, across all databases.",
							"A lease takes a slot when it is first acquired after server start; slots of leases that are not held are reused when the table is full.",
							&tenure_max_leases,
							1024,
							16,
							1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tenure.role_share",
							"Percentage of tenure.max_leases that the tenures of one role may take.",
							"Superusers' tenures count toward their database's share, but no role share limits them.",
							&tenure_role_share,
							50,
							1,
							100,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tenure.database_share",
							"Percentage of tenure.max_leases that the tenures of one database may take.",
							NULL,
							&tenure_database_share,
							75,
							1,
							100,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tenure.history_per_lease",
							"Number of most recent epochs per lease that tenure.history keeps.",
							"Older rows of a lease are deleted in batches as new epochs are issued for it.",
							&tenure_history_per_lease,
							1000,
							1,
							INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("tenure.tokens",
							   "Fencing tokens this session or transaction presents, as lease=epoch pairs separated by commas.",
							   "A value counts only in the transaction that set it: use SET LOCAL or set_config(..., true).",
							   &tenure_tokens_string,
							   "",
							   PGC_USERSET,
							   GUC_NOT_IN_SAMPLE,
							   tenure_tokens_check,
							   tenure_tokens_assign,
							   NULL);

	DefineCustomIntVariable("tenure.claim_timeout",
							"Longest wait of a new tenure or claim for fenced writers that are committing.",
							"0 waits as long as lock_timeout allows.",
							&tenure_claim_timeout,
							10000,
							0,
							INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("tenure.demotion_bound",
							"Longest time an old primary may go on serving after a promotion that may have lost its transactions.",
							"After such a promotion, a new tenure of a lease whose holder may still believe in its tenure on the old primary becomes active no earlier than the promotion plus the lease's ttl plus this bound.  Set it to what the HA manager guarantees for demoting or stopping the old primary.",
							&tenure_demotion_bound,
							20000,
							0,
							INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("tenure.notify",
							 "Sends NOTIFY on channel tenure when a transaction that acquires, releases or claims commits.",
							 "Only while a session of the database has run LISTEN tenure: every transaction that sends a notification commits under one lock of the whole cluster.",
							 &tenure_notify_enabled,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("tenure.log_transitions",
							 "Logs every change of a lease's holder or epoch.",
							 "One LOG line per tenure started, tenure ended and epoch claimed, naming the lease, the holders, their epochs, why the last tenure ended and the gap until the next.",
							 &tenure_log_transitions,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	MarkGUCPrefixReserved("tenure");

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = tenure_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = tenure_shmem_startup;
	prev_object_access_hook = object_access_hook;
	object_access_hook = tenure_object_access;
	prev_ProcessUtility_hook = ProcessUtility_hook;
	ProcessUtility_hook = tenure_process_utility;

	tenure_register_keeper();
	tenure_txn_init();
	tenure_catalog_init();
	tenure_objects_init();
	tenure_fence_init();
}
