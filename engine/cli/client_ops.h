/* client_ops: what a command asks of the engine, with two implementations:
 * the local database (client_local.c: the ops and worker functions in this
 * process, as identity local:USER) and a running `engine serve --listen`
 * (client_http.c: its HTTP API through api_client.c, as the token's
 * identity). Each command (cmd_*.c) is written once against these and prints
 * what they return, so both ways print the same lines, JSON and exit codes.
 * Neither implementation prints, except run_here, which is this process
 * running the workflow as the worker (its progress on stderr).
 *
 * Every operation returns 0, or -1 with *err: the message as the command
 * prints it, and whether the operation itself refused (an ops function's
 * error on the database; the server's 400, 404 or 409) rather than could not
 * be asked (no database, no server, no permission): a command may put its
 * name before a refusal (approve does). */
#ifndef ENGINE_CLIENT_OPS_H
#define ENGINE_CLIENT_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "approval.h"
#include "fork.h"
#include "cli_internal.h"
#include "names.h"
#include "store.h"
#include "trace_start.h"

typedef struct client_err {
  int refused;
  char msg[2048];
} client_err;

typedef struct client client;

/* A workflow's domain events as they come. */
typedef struct client_sink {
  /* each recorded event once, in order; NULL: none wanted (start --quiet) */
  void (*event)(void *ud, const domain_event *e);
  /* the payload of an agent.delta: the text a model streams, never recorded,
   * heard only from a server's stream; NULL: not wanted */
  void (*live)(void *ud, const char *payload, size_t n);
  void *ud;
} client_sink;

/* One item of a list or a history: its JSON as the API answers it
 * (view_list_item_json, view_hist_item_json). Nonzero stops. */
typedef int (*client_item_fn)(void *ud, const char *json, size_t n);

typedef struct client_start_req {
  const char *script; /* a path; with a server, a script of its workflows directory */
  const char *id;     /* NULL: one is made from the script's name */
  const char *input;  /* canonical JSON */
  int detach, quiet;
  const trace_start *trace; /* the caller's trace (--traceparent, TRACEPARENT), recorded in the start; NULL: none */
} client_start_req;

/* A fork (fork.h): the request, and how the command runs it (as a start). */
typedef struct client_fork_req {
  const fork_req *fork; /* its identity is the client's own (local:USER, the token's): left NULL */
  int detach, quiet;
} client_fork_req;

typedef struct client_started {
  char *id;         /* the workflow's (malloc'd): the one named, or the one made */
  int existed;      /* the id named a workflow already: nothing was created */
  int here;         /* no process runs it: this one is to (run_here); nothing was created yet */
  char runner[300]; /* who runs it ("engine serve (pid N)"), unless here, detached or quiet */
} client_started;

/* How a foreground run ends: report gets the workflow's summary (what show
 * --json prints) while the worker is still open, prints the outcome and
 * returns the exit code. */
typedef struct client_run {
  const char *id, *script;
  int quiet, color; /* color: the progress on stderr may use colour */
  int made;         /* the workflow exists already (a fork): carried on, not created */
  int (*report)(void *ud, const char *summary, size_t n);
  void *ud;
} client_run;

enum client_follow_mode {
  CLIENT_FOLLOW_EVENTS, /* until the workflow ends */
  CLIENT_FOLLOW_START,  /* until it ends or is stuck; locally, until the worker goes away too */
};

typedef struct client_ops {
  /* Starts a workflow (or finds the one the id names). Locally: checks the
   * script and the id first, and takes the worker lock unless detached: with
   * it (out->here) nothing is created, for run_here to do. */
  int (*start)(client *cl, const client_start_req *req, client_started *out, client_err *err);
  /* Every event of workflow id from the first (sink), as they come, until
   * mode says stop. *took_over (CLIENT_FOLLOW_START, local only): the worker
   * went away and this process holds the lock now, for run_here. */
  int (*follow)(client *cl, const char *id, enum client_follow_mode mode, const client_sink *sink, int *took_over,
                client_err *err);
  /* Runs the workflow start named here (or took over) in this process as the
   * worker until it ends, is stuck or is interrupted; *code from run->report.
   * Local only: NULL with a server, whose start never says here. */
  int (*run_here)(client *cl, const client_run *run, int *code, client_err *err);
  /* Forks a workflow (fork.h) as the client's identity; *made says where
   * (id, run, seq, at, asked; locally the note too). out->existed: the id is
   * a fork the same request made before (nothing new was written). Locally
   * with no worker running, this process is to run it (out->here, as start). */
  int (*fork)(client *cl, const client_fork_req *req, client_started *out, fork_made *made, client_err *err);
  /* Signal name with payload (canonical JSON), recorded with who sent it. */
  int (*signal)(client *cl, const char *id, const char *name, const char *payload, client_err *err);
  /* A person's message, interrupt or close for a session (kind), with text
   * (the message, the reason, or NULL), as the signal session:input. */
  int (*session_input)(client *cl, const char *id, const char *kind, const char *text, client_err *err);
  int (*cancel)(client *cl, const char *id, client_err *err);
  /* One page of the workflows (with status S, NULL: all) after cursor (NULL:
   * the first); *next is the next page's cursor (malloc'd), NULL after the
   * last. Locally there is one page. */
  int (*list)(client *cl, const char *status, const char *cursor, client_item_fn each, void *ud, char **next,
              client_err *err);
  /* The workflow's summary (view_summary_json; GET /v1/workflows/ID), malloc'd. */
  int (*summary)(client *cl, const char *id, char **json, client_err *err);
  /* The history of run (0: the current one), all of it or an error. */
  int (*history)(client *cl, const char *id, int64_t run, client_item_fn each, void *ud, client_err *err);
  /* One page of the domain events after seq after; *more: another page may
   * follow (ask again after the last one given). Locally there is one page. */
  int (*events)(client *cl, const char *id, int64_t after, void (*each)(void *ud, const domain_event *e), void *ud,
                int *more, client_err *err);
  /* 0 when the identity this client answers approvals as may approve, else
   * -1 with err, before anything is read: locally local:USER, checked as
   * approval_answer checks an approver; a server checks its token's itself. */
  int (*approver)(client *cl, client_err *err);
  /* The approval requests workflow id waits on, oldest first, and its status
   * (status[32]); none when it has finished. */
  int (*pending)(client *cl, const char *id, char *status, int (*each)(void *ud, const approval_request *r),
                 void *ud, client_err *err);
  /* Answers request request_id of workflow id, if it is still pending, as
   * the client's identity (local:USER, the token's); *done names it (its
   * request_id, tool and kind). */
  int (*answer)(client *cl, const char *id, const char *request_id, int approved, const char *reason,
                approval_request *done, client_err *err);
  /* Session id's signed audit export (audit.h): malloc'd text in *out, *len bytes. */
  int (*audit)(client *cl, const char *id, char **out, size_t *len, client_err *err);
  /* The memory entries (memory.h) of kind and identity (NULL: any), revoked
   * ones too, each as memory_json; one entry (*json malloc'd); revoking one
   * as the client's identity with reason (NULL: none), *json the entry after. */
  int (*memory_list)(client *cl, const char *kind, const char *identity, client_item_fn each, void *ud,
                     client_err *err);
  int (*memory_show)(client *cl, const char *id, char **json, client_err *err);
  int (*memory_revoke)(client *cl, const char *id, const char *reason, char **json, client_err *err);
  void (*close)(client *cl);
} client_ops;

/* Each implementation's state starts with this. */
struct client {
  const client_ops *ops;
};

/* The client c names: a server's (--server, $ENGINE_SERVER) or the local
 * database's. 0, or the exit code after saying why not (--db with --server, a
 * URL that is not usable). */
int client_open(const common *c, client **out);
void client_close(client *cl);
/* Says err (after prefix when the operation refused); returns exit code 2. */
int client_fail(const client_err *err, const char *prefix);

/* The implementations (client_open picks one). */
client *client_local_new(const char *db);
client *client_http_new(const char *url, const char *token, char *err, size_t errlen);

#endif
