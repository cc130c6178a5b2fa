/* cmd_approvals: `engine approve`, once for both ways (client_ops.h). Which
 * request is answered is decided here alone: the one named (--request), else,
 * on a terminal only, the one request the workflow waits on, shown to the
 * operator and confirmed with y (an approval answers what its approver saw:
 * a script that read an earlier request must name it); the answer itself is checked again where it is written (the
 * ops layer's approval_answer, locally or in the server), so an answer never
 * lands on a request that timed out or was answered meanwhile. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "approval.h"
#include "client_ops.h"
#include "render.h"

static const char *APPROVE_HELP =
    "usage: engine approve ID [--request RID] [--deny] [--reason TEXT] [--db PATH]\n"
    "\n"
    "Answers approval request RID of session ID (delivered as the signal\n"
    "approval:RID) and says which one it answered: when another one is pending\n"
    "instead (RID timed out or was answered meanwhile) nothing is sent and it\n"
    "exits 2, as it does when nothing is pending, the request's deadline passed\n"
    "or it is answered already.\n"
    "Without --request, on a terminal, it shows the one request ID waits on and\n"
    "asks y/N before answering it; elsewhere (a script, a pipe) it sends nothing,\n"
    "exits 2 and names the pending request: pass --request with the id you read.\n"
    "When the session waits on several, --request says which.\n"
    "With --server the approver recorded is the token's identity (token:NAME).\n";

typedef struct pending {
  approval_request oldest;
  int n;
} pending;

static int count_pending(void *ud, const approval_request *r) {
  pending *p = ud;
  if (p->n++ == 0) p->oldest = *r;
  return 0;
}

/* Shows the pending request r on the terminal and reads y/N: EXIT_OK on yes,
 * else the exit code after saying nothing was sent. */
static int confirm(const char *id, const approval_request *r, int deny) {
  char when[64] = "", until[64] = "";
  time_t t = (time_t)(r->since / 1000);
  struct tm tm;
  if (r->since > 0 && localtime_r(&t, &tm)) strftime(when, sizeof when, ", asked at %Y-%m-%d %H:%M:%S", &tm);
  t = (time_t)(r->deadline / 1000);
  if (r->deadline > 0 && localtime_r(&t, &tm)) strftime(until, sizeof until, ", answer before %Y-%m-%d %H:%M:%S", &tm);
  render_line(stderr, DIE_MAX, "%s waits on approval request %s (%s %s%s%s)", id, r->request_id,
              *r->tool ? "tool" : "kind", *r->tool ? r->tool : (*r->kind ? r->kind : "unnamed"), when, until);
  fprintf(stderr, "%s it? [y/N] ", deny ? "deny" : "approve");
  fflush(stderr);
  char line[64];
  if (!fgets(line, sizeof line, stdin)) line[0] = 0;
  char *s = line, *end;
  while (isspace((unsigned char)*s)) s++;
  for (end = s + strlen(s); end > s && isspace((unsigned char)end[-1]);) *--end = 0;
  if (strcasecmp(s, "y") == 0 || strcasecmp(s, "yes") == 0) return EXIT_OK;
  fputs("engine: nothing sent\n", stderr);
  return EXIT_FAILED;
}

/* The request to answer when none is named: the one workflow id waits on,
 * into rid, once the operator confirmed it on a terminal; else the exit code
 * after saying why none is answered. */
static int choose(client *cl, const char *id, int deny, char *rid, size_t n) {
  char status[32];
  pending p = {.n = 0};
  client_err e;
  if (cl->ops->pending(cl, id, status, count_pending, &p, &e) != 0) return client_fail(&e, "approve: ");
  if (engine_status_terminal(status))
    return cli_die(EXIT_USAGE, "approve: workflow '%s' is %s: no approval is pending", id, status);
  if (p.n == 0) return cli_die(EXIT_USAGE, "approve: no approval is pending for %s", id);
  if (p.n > 1)
    return cli_die(EXIT_USAGE, "approve: %s waits on %d approval requests (the oldest is '%s'%s%s): name the one you answer",
                   id, p.n, p.oldest.request_id, *p.oldest.tool ? " for tool " : "", p.oldest.tool);
  snprintf(rid, n, "%s", p.oldest.request_id);
  /* off a terminal nobody saw which request this is: one that timed out
   * meanwhile would be replaced by the next, which the caller never read */
  if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))
    return cli_die(EXIT_USAGE,
                   "approve: --request is required when not on a terminal: %s waits on request '%s'%s%s; "
                   "pass --request %s to answer the request you read",
                   id, p.oldest.request_id, *p.oldest.tool ? " for tool " : "", p.oldest.tool, p.oldest.request_id);
  return confirm(id, &p.oldest, deny);
}

int cmd_approve(args *a, common *c) {
  const char *id = NULL, *request = NULL, *reason = "";
  int deny = 0, bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = cli_flag_value(a, "--request", &bad))) request = v;
    else if ((v = cli_flag_value(a, "--reason", &bad))) reason = v;
    else if (cli_is_flag(cur, "--deny")) deny = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(APPROVE_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "approve: unknown option %s", cur);
    else if (!id) id = cur;
    else return cli_die(EXIT_USAGE, "approve: unexpected argument %s", cur);
  }
  if (!id) return cli_die(EXIT_USAGE, "approve: missing ID (see engine approve --help)");
  char err[1024];
  if (approval_check_reason(reason, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "approve: %s", err);
  client *cl;
  if ((rc = client_open(c, &cl))) return rc;
  client_err e;
  if (cl->ops->approver(cl, &e) != 0) return client_close(cl), client_fail(&e, "approve: ");
  char rid[sizeof ((approval_request *)0)->request_id];
  if (!request) {
    if ((rc = choose(cl, id, deny, rid, sizeof rid))) return client_close(cl), rc;
    request = rid;
  }
  approval_request done;
  if (cl->ops->answer(cl, id, request, !deny, reason, &done, &e) != 0) {
    client_close(cl);
    return client_fail(&e, "approve: ");
  }
  client_close(cl);
  char about[300] = "";
  if (*done.tool) snprintf(about, sizeof about, " (tool %.200s)", done.tool);
  else if (*done.kind) snprintf(about, sizeof about, " (%.200s)", done.kind);
  render_line(stderr, DIE_MAX, "engine: %s request %s%s of %s", deny ? "denied" : "approved", done.request_id, about, id);
  return EXIT_OK;
}
