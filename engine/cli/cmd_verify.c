/* cmd_verify: `engine verify ID... | --all`, on the local database only:
 * every hash chain of the workflows named (or of all of them) and the content
 * hash of each artifact their sessions saved (ops/verify.h), as a table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "json.h"
#include "render.h"
#include "util.h"
#include "verify.h"
#include "workflow_ops.h"

static const char *VERIFY_HELP =
    "usage: engine verify ID... [--json] [--db PATH]\n"
    "       engine verify --all [--json] [--db PATH]\n"
    "\n"
    "Checks that each workflow's log is what was written: both hash chains (its\n"
    "history, every run, and its domain events), each event's hash against its\n"
    "bytes and the one before it, each chain's end against the head its row\n"
    "records, and the content hash of every artifact its session saved. Prints a\n"
    "table (id, events checked, artifacts checked, ok or BAD with the first bad\n"
    "seq or file); --json one object per workflow. Exit 0 when all are ok, 1 when\n"
    "any is BAD, 2 for an unknown ID or a database that cannot be read.\n"
    "Events older than the chain (a database made before it) are counted, not checked.\n";

/* The ids of every workflow, collected before any is checked. */
typedef struct ids {
  char **v;
  size_t n, cap;
} ids;

static int add_id(void *ud, const wf_row *w) {
  ids *l = ud;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    l->v = util_xrealloc(l->v, l->cap * sizeof *l->v);
  }
  l->v[l->n++] = util_strdup(w->id);
  return 0;
}

static void print_row(const common *c, const char *id, int width, const verify_row *r) {
  if (c->json) {
    char *qid = json_quote(id), *qp = json_quote(r->problem);
    cli_put_json(stdout, util_fmt("{\"id\":%s,\"ok\":%s,\"events\":%lld,\"unchained\":%lld,\"artifacts\":%d%s%s}", qid,
                                  r->ok ? "true" : "false", (long long)r->events, (long long)r->unchained, r->artifacts,
                                  r->ok ? "" : ",\"problem\":", r->ok ? "" : qp));
    free(qid);
    free(qp);
    return;
  }
  char unchained[48] = "";
  if (r->unchained) snprintf(unchained, sizeof unchained, " (%lld before the chain)", (long long)r->unchained);
  render_line(stdout, 0, "%-*s  %6lld  %9d  %s%s%s", width, id, (long long)r->events, r->artifacts,
              r->ok ? "ok" : "BAD: ", r->ok ? "" : r->problem, r->ok ? unchained : "");
}

int cmd_verify(args *a, common *c) {
  int all = 0, bad = 0;
  ids named = {0};
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad)))
      c->db = v;
    else if (cli_is_flag(cur, "--all"))
      all = 1;
    else if (cli_is_flag(cur, "--json"))
      c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h"))
      return fputs(VERIFY_HELP, stdout), EXIT_OK;
    else if (bad)
      break;
    else if (cur[0] == '-' && cur[1]) {
      bad = 1;
      cli_die(EXIT_USAGE, "verify: unknown option %s (see engine verify --help)", cur);
      break;
    } else {
      wf_row w = {.id = (char *)cur};
      add_id(&named, &w);
    }
  }
  int rc = EXIT_OK;
  if (!bad && all && named.n)
    rc = cli_die(EXIT_USAGE, "verify: --all checks every workflow: give no ID with it");
  else if (!bad && !all && !named.n)
    rc = cli_die(EXIT_USAGE, "verify: missing ID or --all (see engine verify --help)");
  store *st = NULL;
  if (bad) rc = EXIT_USAGE;
  if (rc == EXIT_OK) rc = cli_open_existing(c->db, &st);
  if (rc == EXIT_OK && all && store_wf_list(st, NULL, add_id, &named) != STORE_OK) {
    rc = cli_read_failed(st, "the workflows", c->db);
    st = NULL;
  }
  int width = 2;
  for (size_t i = 0; i < named.n; i++)
    if ((int)strlen(named.v[i]) > width) width = strlen(named.v[i]) > 40 ? 40 : (int)strlen(named.v[i]);
  if (rc == EXIT_OK && !c->json) printf("%-*s  %6s  %9s  %s\n", width, "ID", "EVENTS", "ARTIFACTS", "STATUS");
  size_t nbad = 0, nok = 0;
  for (size_t i = 0; rc == EXIT_OK && i < named.n; i++) {
    verify_row r;
    char err[1024];
    int found = verify_workflow(st, named.v[i], &r, err, sizeof err);
    if (found == 0) {
      engine_unknown_id(named.v[i], err, sizeof err);
      rc = cli_die(EXIT_USAGE, "%s", err);
    } else if (found < 0) {
      rc = cli_die(EXIT_USAGE, "cannot read %s: %s", named.v[i], err);
    } else {
      print_row(c, named.v[i], width, &r);
      if (r.ok)
        nok++;
      else
        nbad++;
    }
  }
  if (rc == EXIT_OK && !c->json)
    printf("%zu workflow%s checked: %zu ok, %zu BAD\n", named.n, named.n == 1 ? "" : "s", nok, nbad);
  if (st) store_close(st);
  for (size_t i = 0; i < named.n; i++) free(named.v[i]);
  free(named.v);
  return rc != EXIT_OK ? rc : nbad ? EXIT_FAILED : EXIT_OK;
}
