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
  int64_t snap;   /* the last workspace.snapshot at or before upto */
  int64_t write;  /* the last tool.result that may have written ("writes": true) */
  int64_t turns;  /* agent.message events so far: the turn of that write */
  int64_t write_turn;
} ws_scan;

static int scan(void *ud, const domain_event *e) {
  ws_scan *w = ud;
  if (e->seq > w->upto) return 1;
  size_t pn = e->payload ? strlen(e->payload) : 0;
  if (strcmp(e->type, "agent.message") == 0) w->turns++;
  if (strcmp(e->type, "workspace.snapshot") == 0) w->snap = e->seq;
  if (strcmp(e->type, "tool.result") == 0 && pn) {
    const char *v;
    size_t vn;
    if (json_get(e->payload, pn, "writes", &v, &vn) == 1 && vn == 4 && memcmp(v, "true", 4) == 0) {
      w->write = e->seq;
      w->write_turn = w->turns;
    }
  }
  if (strcmp(e->type, "workspace.unrebuildable") != 0) return 0;
  w->seq = e->seq;
  w->turn = e->payload ? json_get_int(e->payload, strlen(e->payload), "turn", 0) : 0;
  w->reason = e->payload ? json_get_string(e->payload, strlen(e->payload), "reason") : NULL;
  return 1;
}

int fork_workspace_refused(store *st, const char *source, int64_t upto, char *why, size_t whylen) {
  ws_scan w = {upto, 0, 0, NULL, 0, 0, 0, 0};
  int rc = store_domain_list(st, source, 0, scan, &w);
  if (rc != STORE_OK) {
    free(w.reason);
    return -1;
  }
  if (!w.seq && w.write > w.snap) {
    util_seterr(why, whylen,
                "the workspace of '%s' at #%lld cannot be rebuilt: the tools of turn %lld wrote it (#%lld) after its "
                "last snapshot (#%lld) and before the point; fork it at that turn's workspace.snapshot or before its "
                "tool calls",
                source, (long long)upto, (long long)w.write_turn, (long long)w.write, (long long)w.snap);
    return 1;
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
