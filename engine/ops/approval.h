/* approval: a session's approval requests and answering one, for the CLI and
 * the HTTP API alike.
 *
 * A session asks by emitting approval.requested {request_id, tool | kind, ...}
 * and waiting on the signal "approval:RID"; the answer is that signal with
 * {approved, approver, reason, request_id}. A request is pending while the
 * workflow waits on its signal, before its deadline, with no answer buffered
 * yet. Answering checks all of that and writes the signal in one write
 * transaction, so an answer never lands on a request that timed out or was
 * answered meanwhile, and never on one the caller did not name. */
#ifndef ENGINE_APPROVAL_H
#define ENGINE_APPROVAL_H

#include <stdint.h>

#include "store.h"

/* The request id an approval signal's name carries ("approval:RID" -> "RID"),
 * or NULL when name is not an approval signal. */
const char *approval_request_of(const char *signal_name);

typedef struct approval_request {
  char request_id[256];
  char tool[128];   /* the tool it is about, or "" */
  char kind[32];    /* "memory" for a memory update, or "" */
  int64_t deadline; /* epoch ms, or -1 when it has none */
  int64_t since;     /* when it was asked (its approval.requested event), epoch ms */
  int64_t event_seq; /* that event's seq in the session's stream (0: not found) */
} approval_request;

/* The request workflow id waits on (the oldest, when it waits on several):
 * 1 with *out filled, 0 when none is pending, -1 with err (an unknown
 * workflow, a read error). */
int approval_pending(store *st, const char *id, approval_request *out, char *err, size_t errlen);
/* Every request workflow id waits on, oldest first (cb returning nonzero
 * stops): 0, or -1 with err. */
int approval_each_pending(store *st, const char *id, int (*cb)(void *ud, const approval_request *r), void *ud,
                          char *err, size_t errlen);

#define APPROVAL_APPROVER_MAX 256
#define APPROVAL_REASON_MAX 4096

/* 0 when reason can go into the log (at most APPROVAL_REASON_MAX bytes of
 * UTF-8 without control characters other than \n and \t), else -1 with err:
 * what approval_answer checks, for a client that checks before it sends. */
int approval_check_reason(const char *reason, char *err, size_t errlen);

typedef struct approval_decision {
  const char *request_id; /* the request meant; NULL: the pending one, whichever it is */
  int approved;
  const char *approver, *reason;
} approval_decision;

/* Answers a pending request of workflow id: 0 with *answered naming it, or -1
 * with err saying why nothing was written (an approver that is not 1 to
 * APPROVAL_APPROVER_MAX bytes of UTF-8 without control characters, a reason
 * over APPROVAL_REASON_MAX bytes or with control characters other than \n and
 * \t, no such workflow, nothing pending,
 * another request pending than the one named, its deadline passed, already
 * answered, a store error). */
int approval_answer(store *st, const char *id, const approval_decision *a, approval_request *answered, char *err,
                    size_t errlen);
/* The same inside the caller's open batch (the worker's, for the HTTP API):
 * nothing is committed, and a refusal writes nothing. */
int approval_answer_in_batch(store *st, const char *id, const approval_decision *a, approval_request *answered,
                             char *err, size_t errlen);

#endif
