/* api_memory: /v1/memory, the knowledge and preferences sessions proposed
 * and a person approved (ops/memory.h, docs/memory.md): the list (?kind=,
 * ?identity=, ?live=true for the live ones only), one entry, and its
 * revocation (the approve scope: who may decide what sessions remember may
 * take it back), answered once committed with the entry as it is then. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "memory.h"

static int memory_item(void *ud, char *json) {
  api_items_add(ud, json);
  return 0;
}

void api_h_memory_list(api *a, httpd_req *r, ctx *c) {
  (void)c;
  char kind[32], identity[320], live[8];
  int hk = api_query(r, "kind", kind, sizeof kind), hi = api_query(r, "identity", identity, sizeof identity),
      hl = api_query(r, "live", live, sizeof live);
  if (hk < 0 || hi < 0 || hl < 0) return;
  if (hl == 1 && strcmp(live, "true") != 0 && strcmp(live, "false") != 0)
    return api_reply_error(r, 400, "query parameter 'live' must be true or false");
  char err[512];
  if (hk == 1 && !memory_kind_stored(kind))
    return api_reply_error(r, 400, "unknown memory kind '%.40s' (knowledge or preferences)", kind);
  json_items x = {{0}, 0};
  int rc = memory_list(a->rd, hk == 1 ? kind : NULL, hi == 1 ? identity : NULL, hl == 1 && strcmp(live, "true") == 0,
                       memory_item, &x, err, sizeof err);
  api_reply_items(a, r, "memory", &x, rc == 0 ? STORE_OK : STORE_ERR);
}

void api_h_memory_show(api *a, httpd_req *r, ctx *c) {
  char err[512], *json;
  int found = memory_show(a->rd, c->p1, &json, err, sizeof err);
  if (found < 0) return api_reply_store_error(a, r, a->rd);
  if (found == 0) return api_reply_error(r, 404, "no memory entry '%.80s'", c->p1);
  api_reply_json(r, 200, json, NULL);
}

static const char *REVOKE_KEYS[] = {"reason", NULL};

void api_h_memory_revoke(api *a, httpd_req *r, ctx *c) {
  if (api_body_object(a, r, REVOKE_KEYS) != 0) return;
  char reason[MEMORY_REASON_MAX + 1], err[1024], *json = NULL;
  int got = api_field_string(a, "reason", reason, sizeof reason);
  if (got < 0) return api_reply_error(r, 400, "\"reason\" must be a string of at most %d bytes", MEMORY_REASON_MAX);
  int rc = memory_revoke(engine_store(a->e), c->p1, c->identity, got == 1 ? reason : NULL, util_now_ms(), &json, err,
                         sizeof err);
  if (rc == 1) return api_answer_when_committed(a, r, 200, json, NULL, NULL);
  if (api_store_down(a, r)) return;
  if (rc == 0) return api_reply_error(r, 404, "%s", err);
  api_reply_error(r, rc == 2 ? 409 : 400, "%s", err);
}
