/*-------------------------------------------------------------------------
 *
 * keeper.h
 *		Declarations of keeper.c: the keeper worker.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_KEEPER_H
#define TENURE_KEEPER_H

#include "pg_tenure.h"

extern void tenure_register_keeper(void);
PGDLLEXPORT void tenure_keeper_main(Datum arg);

#endif							/* TENURE_KEEPER_H */
