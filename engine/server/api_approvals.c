/* api_approvals: the approval requests sessions wait on (GET /v1/approvals)
 * and the answer to one (POST /v1/workflows/{id}/approvals/{request_id}),
 * given by the token's identity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "approval.h"
#include "json.h"

static int first_event(void *ud, const domain_event *e) {
  char **out = ud;
  *out = util_strdup(e->payload ? e->payload : "null");
  return 1;
}

/* Member key of the JSON object text as it is written there (malloc'd),
 * "null" when absent: the event's own bytes, not decoded and encoded again. */
static char *json_member(const char *text, const char *key) {
  const char *v;
  size_t vn;
  if (json_get(text, strlen(text), key, &v, &vn) != 1) return util_strdup("null");
  char *out = util_xmalloc(vn + 1);
  memcpy(out, v, vn);
  out[vn] = 0;
  return out;
}

typedef struct pending_of {
  approvals_ctx *x;
  const char *id;
  const char *parent; /* the session that delegated it (the workflows row's parent), or NULL */
} pending_of;

static int pending_item(void *ud, const approval_request *p) {
  pending_of *o = ud;
  approvals_ctx *x = o->x;
  char *event = NULL;
  if (p->event_seq > 0) store_domain_list(x->a->rd, o->id, p->event_seq - 1, first_event, &event);
  if (!event) event = util_strdup("null");
  char *args = json_member(event, "args"), *reason = json_member(event, "reason");
  char *qi = json_quote(o->id), *qr = json_quote(p->request_id), *qt = json_quote(p->tool), *qk = json_quote(p->kind);
  char *qp = o->parent ? json_quote(o->parent) : util_strdup("null");
  char dl[32] = "null";
  if (p->deadline >= 0) snprintf(dl, sizeof dl, "%lld", (long long)p->deadline);
  char *item = util_fmt("%s{\"session_id\":%s,\"parent\":%s,\"request_id\":%s,\"tool\":%s,\"kind\":%s,"
                        "\"arguments\":%s,\"reason\":%s,\"since\":%lld,\"deadline\":%s,\"request\":%s}",
                        x->n ? "," : "", qi, qp, qr, qt, qk, args, reason, (long long)p->since, dl, event);
  free(qp);
  ubuf_add(&x->b, item, strlen(item));
  x->n++;
  free(item);
  free(qi);
  free(qr);
  free(qt);
  free(qk);
  free(args);
  free(reason);
  free(event);
  return 0;
}

/* Every pending request of a session (several when a turn asked together). */
static int pending_row(void *ud, const wf_row *w) {
  approvals_ctx *x = ud;
  char err[512];
  pending_of o = {x, w->id, w->parent};
  if (approval_each_pending(x->a->rd, w->id, pending_item, &o, err, sizeof err) != 0) {
    x->failed = 1;
    return 1;
  }
  return 0;
}

void api_h_approvals(api *a, httpd_req *r, ctx *c) {
  (void)c;
  approvals_ctx x = {a, {0}, 0, 0};
  ubuf_add(&x.b, "{\"approvals\":[", 14);
  if (store_wf_list(a->rd, "waiting", pending_row, &x) != STORE_OK || x.failed) {
    ubuf_free(&x.b);
    return api_reply_store_error(a, r, a->rd);
  }
  ubuf_add(&x.b, "]}", 3);
  api_reply_json(r, 200, x.b.p, NULL);
}

static const char *APPROVE_KEYS[] = {"approved", "reason", NULL};

void api_h_approve(api *a, httpd_req *r, ctx *c) {
  if (api_body_object(a, r, APPROVE_KEYS) != 0) return;
  int approved = api_field_bool(a, "approved");
  if (approved < 0) return api_reply_error(r, 400, "\"approved\" is required: true or false");
  char reason[APPROVAL_REASON_MAX + 1] = "";
  if (api_field_string(a, "reason", reason, sizeof reason) < 0)
    return api_reply_error(r, 400, "\"reason\" must be a string of at most %d bytes", APPROVAL_REASON_MAX);
  wf_row w;
  if (!api_find_for_write(a, r, c->p1, &w)) return;
  wf_row_free(&w);
  /* the approver is the token's identity, never anything the body says */
  approval_decision d = {c->p2, approved, c->identity, reason};
  approval_request done;
  char err[1024];
  if (approval_answer_in_batch(engine_store(a->e), c->p1, &d, &done, err, sizeof err) != 0) {
    if (api_store_down(a, r)) return;
    int bad = strncmp(err, "invalid", 7) == 0 || strncmp(err, "the reason", 10) == 0;
    return api_reply_error(r, bad ? 400 : 409, "%s", err);
  }
  engine_dispatch_now(a->e);
  char *qi = json_quote(c->p1), *qr = json_quote(done.request_id), *qa = json_quote(c->identity),
       *qt = json_quote(done.tool), *qk = json_quote(done.kind);
  api_answer_when_committed(a, r, 200,
                            util_fmt("{\"session_id\":%s,\"request_id\":%s,\"approved\":%s,\"approver\":%s,\"tool\":%s,"
                                     "\"kind\":%s}",
                                     qi, qr, approved ? "true" : "false", qa, qt, qk),
                            NULL, NULL);
  free(qi);
  free(qr);
  free(qa);
  free(qt);
  free(qk);
}
