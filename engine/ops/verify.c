/* verify: see verify.h. */
#include "verify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

/* The artifact.saved payloads of a session, as read (and checked) by store_domain_list. */
typedef struct saved {
  char **payload;
  size_t n, cap;
} saved;

static int on_event(void *ud, const domain_event *e) {
  saved *s = ud;
  if (strcmp(e->type, "artifact.saved") != 0 || !e->payload) return 0;
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 8;
    s->payload = util_xrealloc(s->payload, s->cap * sizeof *s->payload);
  }
  s->payload[s->n++] = util_strdup(e->payload);
  return 0;
}

/* Checks one artifact.saved payload: 0, or -1 with problem. */
static int check_artifact(const char *payload, char *problem, size_t n) {
  size_t len = strlen(payload);
  char *path = json_get_string(payload, len, "path"), *sha = json_get_string(payload, len, "sha256"),
       *stored = json_get_string(payload, len, "stored");
  int rc = 0;
  char got[65];
  if (!sha || !stored) {
    util_seterr(problem, n, "artifact %.200s: its event names no sha256 and stored file", path ? path : "(no path)");
    rc = -1;
  } else if (util_file_sha256_hex(stored, got) != 0) {
    util_seterr(problem, n, "artifact %.200s: its stored file %.300s cannot be read (%s)", path ? path : "", stored,
                strerror(errno));
    rc = -1;
  } else if (strcmp(got, sha) != 0) {
    util_seterr(problem, n,
                "artifact %.200s: its stored file %.300s does not have the sha256 its event records "
                "(altered)",
                path ? path : "", stored);
    rc = -1;
  }
  free(path);
  free(sha);
  free(stored);
  return rc;
}

int verify_workflow(store *st, const char *id, verify_row *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  store_verify v;
  int found = store_verify_chains(st, id, &v);
  if (found <= 0) {
    if (found < 0) util_seterr(err, errlen, "%s", store_errmsg(st));
    return found;
  }
  out->events = v.checked;
  out->unchained = v.unchained;
  if (!v.ok) {
    snprintf(out->problem, sizeof out->problem, "%s", v.problem);
    return 1;
  }
  saved s = {0};
  int rc = store_domain_list(st, id, 0, on_event, &s);
  if (rc == STORE_ECORRUPT) { /* changed since the chains were checked */
    snprintf(out->problem, sizeof out->problem, "%s", store_errmsg(st));
  } else if (rc != STORE_OK) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    found = -1;
  } else {
    out->ok = 1;
    for (size_t i = 0; i < s.n && out->ok; i++) {
      out->artifacts++;
      if (check_artifact(s.payload[i], out->problem, sizeof out->problem) != 0) out->ok = 0;
    }
  }
  for (size_t i = 0; i < s.n; i++) free(s.payload[i]);
  free(s.payload);
  return found;
}
