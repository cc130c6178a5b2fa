/* fork_workspace: an agent session's workspace.unrebuildable events, read
 * before a fork is made (fork_workspace.h). */
#include "fork_workspace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

typedef struct ws_scan {
  int64_t upto;
  int64_t seq;    /* the first workspace.unrebuildable at or before upto, or 0 */
  int64_t turn;   /* the turn it names */
  char *reason;   /* its reason */
} ws_scan;

static int scan(void *ud, const domain_event *e) {
  ws_scan *w = ud;
  if (e->seq > w->upto) return 1;
  if (strcmp(e->type, "workspace.unrebuildable") != 0) return 0;
  w->seq = e->seq;
  w->turn = e->payload ? json_get_int(e->payload, strlen(e->payload), "turn", 0) : 0;
  w->reason = e->payload ? json_get_string(e->payload, strlen(e->payload), "reason") : NULL;
  return 1;
}

int fork_workspace_refused(store *st, const char *source, int64_t upto, char *why, size_t whylen) {
  ws_scan w = {upto, 0, 0, NULL};
  int rc = store_domain_list(st, source, 0, scan, &w);
  if (rc != STORE_OK) {
    free(w.reason);
    return -1;
  }
  if (!w.seq) return 0;
  util_seterr(why, whylen,
              "the workspace of '%s' at #%lld cannot be rebuilt: %s (its event #%lld, workspace.unrebuildable); fork "
              "it before the tool calls of turn %lld",
              source, (long long)upto, w.reason ? w.reason : "the session recorded no reason", (long long)w.seq,
              (long long)w.turn);
  free(w.reason);
  return 1;
}
