/* workflow_ops: create, signal and cancel a workflow with only the database
 * (any process), and the checks they make first. */
#ifndef ENGINE_WORKFLOW_OPS_H
#define ENGINE_WORKFLOW_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "names.h"
#include "store.h"
#include "trace_start.h"

/* The error for an id that names no workflow: what is wrong with the id, or
 * "unknown workflow 'ID'". */
void engine_unknown_id(const char *id, char *err, size_t errlen);

/* Checks a script read from path as a start would run it: it compiles, and its
 * main chunk, run alone in a throwaway sandbox (modules from beside it),
 * returns function(input). Returns 0, or -1 with err. */
int engine_check_script(const char *path, const char *src, size_t len, char *err, size_t errlen);

/* ---- each is one transaction, committed on return ---- */

/* Creates workflow id from script (stored by content hash) with input JSON and
 * queues it; trace (NULL: none) is its caller's trace context, recorded in
 * its WorkflowStarted (trace_start.h). *existed is set (and nothing written,
 * the trace recorded before kept) when id already exists. */
int engine_create_workflow(store *st, const char *id, const char *script_path, const char *input_json,
                           const trace_start *trace, int *existed, char *err, size_t errlen);

/* A signal and a cancellation record who asked (identity, e.g. "local:ada",
 * "token:ci") as the session's domain event signal.sent {name, by} or
 * cancel.requested {by}, in the same transaction; NULL records nothing. */
int engine_send_signal(store *st, const char *id, const char *name, const char *payload, const char *identity,
                       char *err, size_t errlen);
int engine_request_cancel(store *st, const char *id, const char *identity, char *err, size_t errlen);

/* input_json (an object) with its top-level "identity" set to identity (who
 * or what starts the workflow: "token:NAME", "local:USER"), canonical,
 * malloc'd; whatever identity the input claimed is replaced. Input that is
 * not an object: NULL with err when required, else a canonical copy. Its
 * "starterGrants" (what the starter holds, docs/grants.md) is set to none:
 * whatever the input claimed is replaced. */
char *engine_input_with_identity(const char *input_json, const char *identity, int required, char *err,
                                 size_t errlen);
/* The same, with "starterGrants" set to starter_grants: JSON text, "\"*\""
 * for every grant (the local CLI, an API without tokens) or a list of grants
 * (an API token's, a trigger's). */
char *engine_input_with_starter(const char *input_json, const char *identity, const char *starter_grants,
                                int required, char *err, size_t errlen);

/* What a person tells a running session (workflows/agent_session.lua): kind
 * "message" (text 1-ENGINE_MESSAGE_MAX bytes, required), "interrupt" (text:
 * an optional reason) or "close", delivered as the signal
 * ENGINE_SESSION_SIGNAL with the sender the engine knows (never one the
 * caller claims). Returns the payload {"kind","sender","text"} (malloc'd),
 * or NULL with err naming what is wrong. */
char *engine_session_input(const char *kind, const char *text, const char *sender, char *err, size_t errlen);

/* ---- the same writes into a transaction the caller owns (the worker's batch) ---- */

/* A workflow script read, hashed and checked (the worker caches them by path). */
typedef struct scriptbuf {
  int64_t mtime_ns, size;
  char *src;
  size_t len;
  char hash[65];
} scriptbuf;

/* A new workflow's row and first event, for a run that starts at once
 * without reading them back. */
typedef struct made_wf {
  wf_row w;
  hist_list h;
} made_wf;

/* Writes a new workflow (row, code, WorkflowStarted, and a task when queue is
 * set) into the open transaction (begun when none is), and into *made when
 * given; pre, when given, is the script already read and checked; trace
 * (NULL: none) goes into its WorkflowStarted. Nothing is written when the
 * script cannot be read or parsed, or when id exists (*existed, and its row
 * into *existing when given, to be freed): one insert that writes or finds
 * (store_wf_start), so two starts of one id never both write. */
int ops_write_workflow(store *st, const char *id, const char *script_path, const char *input_json, int queue,
                       const scriptbuf *pre, const trace_start *trace, int *existed, wf_row *existing, made_wf *made,
                       char *err, size_t errlen);
/* The same, queued, sent without waiting for its answer (store_wf_start_send,
 * PostgreSQL): 0 with *sent (whether it was written or found is known once
 * the batch committed: store_start_result), or with *existed when id is one
 * made before the id check (no start sent); -1 with err. *made is the row
 * and first event as sent. */
int ops_send_workflow(store *st, const char *id, const char *script_path, const char *input_json,
                      const scriptbuf *pre, const trace_start *trace, int *existed, wf_row *existing, made_wf *made,
                      store_start **sent, char *err, size_t errlen);
/* The same for a child workflow (wf.child): queued, its row naming its
 * parent and what the parent's end does to it (parent_close); trace is the
 * parent's step that starts it (children.c). */
int ops_write_child(store *st, const char *id, const char *script_path, const scriptbuf *pre, const char *input_json,
                    const char *parent, const char *parent_close, const trace_start *trace, int *existed,
                    wf_row *existing, char *err, size_t errlen);
/* Checks, inside the open transaction, that workflow id exists and has not
 * finished; *cancel gets its cancel state. Nothing is written. */
int ops_check_live(store *st, const char *id, const char *what, int *cancel, char *err, size_t errlen);
/* Who asked, as a domain event of the session (type signal.sent or
 * cancel.requested): {"by", "name"}, and the sender's "traceparent" and
 * "tracestate" when trace (NULL: none) has them, so the span of the wait
 * that takes the signal can link to the sender's; nothing when identity
 * and trace are both NULL. */
int ops_record_who(store *st, const char *id, const char *type, const char *name, const char *identity,
                   const trace_start *trace);
/* The cancellation's writes (the flag, a wake-up task, who asked) into the
 * open transaction. */
int ops_write_cancel(store *st, const char *id, const char *identity, char *err, size_t errlen);

#endif
