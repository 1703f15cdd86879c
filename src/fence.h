/*-------------------------------------------------------------------------
 *
 * fence.h
 *		Declarations of fence.c: the fence check and tenure.tokens.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_FENCE_H
#define TENURE_FENCE_H

#include "pg_tenure.h"

extern char *tenure_tokens_string;
extern bool tenure_tokens_check(char **newval, void **extra, GucSource source);
extern void tenure_tokens_assign(const char *newval, void *extra);
extern void tenure_fence_init(void);
extern void tenure_fence_subxact(SubXactEvent event);
extern bool tenure_fence_utility_begin(Node *stmt);
extern void tenure_require_changes(FunctionCallInfo fcinfo);
extern void tenure_fence_utility_end(bool counted);
extern void tenure_fence_check(const char *name, const char *table,
							   bool at_commit, int *fence_lock);
extern void tenure_fence_note(const char *lease, const char *table,
							  LOCKMODE mode, int fence_lock);
extern bool tenure_fence_wrote(void);
extern void tenure_fence_precommit(void);
extern void tenure_fence_reset(void);
extern void tenure_fence_seal(void);

#endif							/* TENURE_FENCE_H */
