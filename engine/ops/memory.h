/* memory: the entries of knowledge and preferences that sessions proposed and
 * a person approved (docs/memory.md). A session proposes one with the tool
 * propose_memory; each proposal is approved or refused on its own, and the
 * tool's activity records an approved one here, once (its id is made from the
 * activity's idempotency key: a rerun after kill -9 writes nothing new).
 * Sessions read the live entries of the kinds their input names; a revoked
 * entry (who, when, why kept) is never given to a session again.
 *
 * Kinds kept here: knowledge (facts, for every session) and preferences (of
 * one identity: the session's starter). Instructions are files the operator
 * owns (the input's memoryFile), session state is the workflow's own, and
 * the audit history is the event log itself: none of them is an entry. */
#ifndef ENGINE_MEMORY_H
#define ENGINE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define MEMORY_TEXT_MAX 2000     /* bytes of an entry's text */
#define MEMORY_EVIDENCE_MAX 2000 /* bytes of its evidence */
#define MEMORY_REASON_MAX 500    /* bytes of a revocation's reason */
#define MEMORY_ID_MAX 64         /* bytes of an id ("mem-" and 24 hex digits) */
#define MEMORY_READ_MAX 100      /* the newest live entries of a kind a session reads */

/* Whether kind is one an entry may have (knowledge, preferences). */
int memory_kind_stored(const char *kind);

/* Checks an entry before it is written: kind, text, evidence, identity (a
 * preferences entry's), session, request and approver. 0, or -1 with err
 * naming the problem. */
int memory_check(const memory_row *m, char *err, size_t errlen);

/* The id of the entry recorded under key (an activity's idempotency key). */
void memory_id_of(const char *key, char out[MEMORY_ID_MAX + 1]);

/* An entry as the API answers it (malloc'd JSON object). */
char *memory_json(const memory_row *m);

/* Records an approved entry (checked first) in the open batch: 1 written, 0
 * its id was written before (nothing changed), -1 with err. */
int memory_record(store *st, const memory_row *m, char *err, size_t errlen);

/* Each entry (as memory_json) of kind and identity (NULL: any), revoked
 * ones too unless live_only, oldest approval first. A kind that is not one
 * refused. Returns 0, or -1 with err. */
int memory_list(store *st, const char *kind, const char *identity, int live_only,
                int (*each)(void *ud, char *json), void *ud, char *err, size_t errlen);

/* Entry id: 1 with *json (malloc'd), 0 none, -1 error (err). */
int memory_show(store *st, const char *id, char **json, char *err, size_t errlen);

/* Revokes entry id as by (who asks), with reason (NULL: none), in the open
 * batch: 1 with *json the entry as it is then; 0 no such entry; 2 it was
 * revoked before (err says by whom and when); -1 error. */
int memory_revoke(store *st, const char *id, const char *by, const char *reason, int64_t at, char **json, char *err,
                  size_t errlen);

/* The activity binding's calls (activity.memory(op, args), lua/memory.lua),
 * args a JSON object: "record" {key, kind, text, evidence?, identity?,
 * session_id, request_id, approver, approved_at} -> {entry, written}; "read"
 * {kinds: [...], identity?} -> {entries: [...]} (live entries only, the
 * newest MEMORY_READ_MAX of each kind, oldest first). Returns malloc'd JSON,
 * or NULL with err. */
char *memory_call(store *st, const char *op, const char *args, size_t n, char *err, size_t errlen);

#endif
