/* fork: a new workflow made from a point of another's history (`engine
 * fork`, POST /v1/workflows/{id}/fork; docs/forking.md). The fork's history
 * is a copy of the source's run up to the point, its domain events 1..seq
 * are the source's, its row records forked_from; from there it runs live
 * (its first task is queued with it). The source is never written. Every
 * check (the point, the input patch, a new script replaying the copied
 * prefix) is made before anything is written, so the caller's transaction
 * holds either the whole fork or nothing of it. */
#ifndef ENGINE_FORK_H
#define ENGINE_FORK_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"
#include "store.h"

typedef struct fork_req {
  const char *source;
  /* the fork point: a domain event's seq (as `engine events` numbers them),
   * or the agent session's N-th model turn; exactly one is given */
  int at_given, turn_given;
  int64_t at, turn;
  const char *id;          /* the fork's id; NULL: SOURCE.fork-N, the first free N */
  const char *input_patch; /* an RFC 7386 JSON merge patch on the source's input, or NULL */
  const char *script;      /* a new script (a path), checked on the copied prefix; NULL: the source's code */
  const char *model;       /* an agent session's model from the fork point on (a JSON object), or NULL */
  const char *policies;    /* an agent session's policy directory from the fork point on, or NULL */
  const char *identity;    /* who forks ("local:ada", "token:ci"), recorded with the fork */
} fork_req;

/* Why a fork was refused (ops_write_fork's *why). */
enum fork_refusal {
  FORK_BAD = 1, /* a field of the request (made.field; "" for none) or a divergence */
  FORK_UNKNOWN, /* no such source */
  FORK_EXISTS,  /* the id is taken */
  FORK_FAILED,  /* the store failed */
  FORK_DAMAGED, /* the source's log is damaged (its hash chain does not check): err names the first bad seq */
};

typedef struct fork_made {
  char id[ENGINE_ID_MAX + 1];
  int64_t run;   /* the source's run the fork continues (its own run has the same number) */
  int64_t seq;   /* the fork has the source's domain events 1..seq */
  int64_t at;    /* and the source's history events 1..at of that run */
  int64_t asked; /* the domain event asked for (--at; 0 for --turn) */
  char note[600]; /* why the fork point is before what was asked, or "" */
  char field[32]; /* refused with FORK_BAD: the request's field at fault, or "" */
  int same;       /* refused with FORK_EXISTS: the id is a fork of the same source made by the same
                   * request (its fingerprint in forked_from): a retry, which may answer with it */
} fork_made;

/* Checks the request and writes the fork into the open transaction (the
 * worker's batch, or one store_begin opens): 0 with *out, or -1 with *why
 * and err, nothing written. */
int ops_write_fork(store *st, const fork_req *req, fork_made *out, int *why, char *err, size_t errlen);

/* The same as one transaction, committed on return (the CLI's local fork). */
int engine_fork_workflow(store *st, const fork_req *req, fork_made *out, int *why, char *err, size_t errlen);

#endif
