/* api_audit: GET /v1/workflows/{id}/audit, a session's signed audit export
 * (audit.h) as JSON lines, signed with this engine's key (the data
 * directory's keys/), downloaded as ID.audit.jsonl. */
#include <stdio.h>
#include <stdlib.h>

#include "api_internal.h"
#include "audit.h"

void api_h_audit(api *a, httpd_req *r, ctx *c) {
  wf_row w;
  if (!api_find_for_read(a, r, c->p1, &w)) return;
  wf_row_free(&w);
  char err[1024];
  sign_key *key;
  if (audit_key_open(store_path(a->rd), &key, err, sizeof err) != 0) return api_reply_error(r, 500, "%s", err);
  char *text;
  size_t len;
  int found = audit_export(a->rd, c->p1, key, c->identity, &text, &len, err, sizeof err);
  sign_key_free(key);
  if (found == 0) return api_reply_error(r, 404, "no workflow '%s'", c->p1);
  if (found < 0) return api_reply_error(r, 500, "%s", err);
  char disp[640];
  char name[560];
  /* a file name of the id's safe characters only */
  size_t j = 0;
  for (const char *s = c->p1; *s && j < sizeof name - 16; s++)
    name[j++] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
                        *s == '_' || *s == '.'
                    ? *s
                    : '_';
  name[j] = 0;
  snprintf(disp, sizeof disp, "Content-Disposition: attachment; filename=\"%s.audit.jsonl\"", name);
  const char *headers[] = {disp, NULL};
  httpd_respond(r, 200, "application/jsonl", text, len, headers);
}
