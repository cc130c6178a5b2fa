/* memory: approved knowledge and preferences, their listing and their
 * revocation (memory.h; docs/memory.md). */
#include "memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "util.h"

int memory_kind_stored(const char *kind) {
  return kind && (strcmp(kind, "knowledge") == 0 || strcmp(kind, "preferences") == 0);
}

/* A field of text: present when required, at most max bytes, text fit for a
 * record (lines: newlines and tabs allowed). */
static int check_text(const char *what, const char *v, size_t max, int required, int lines, char *err, size_t errlen) {
  if (!v || !*v) {
    if (!required) return 0;
    util_seterr(err, errlen, "memory: %s is required", what);
    return -1;
  }
  size_t n = strlen(v);
  if (n > max) {
    util_seterr(err, errlen, "memory: %s is %zu bytes; at most %zu", what, n, max);
    return -1;
  }
  char why[128];
  if (util_text_problem(v, n, lines, why, sizeof why) != 0) {
    util_seterr(err, errlen, "memory: %s is not text: %s", what, why);
    return -1;
  }
  return 0;
}

int memory_check(const memory_row *m, char *err, size_t errlen) {
  if (!memory_kind_stored(m->kind)) {
    util_seterr(err, errlen,
                "memory: kind %s%.40s%s cannot be stored: only knowledge and preferences are (instructions are the "
                "operator's files, session state is the workflow's own)",
                m->kind ? "'" : "", m->kind ? m->kind : "(none)", m->kind ? "'" : "");
    return -1;
  }
  if (check_text("text", m->text, MEMORY_TEXT_MAX, 1, 1, err, errlen) ||
      check_text("evidence", m->evidence, MEMORY_EVIDENCE_MAX, 0, 1, err, errlen) ||
      check_text("session_id", m->session_id, 512, 1, 0, err, errlen) ||
      check_text("request_id", m->request_id, 512, 1, 0, err, errlen) ||
      check_text("approver", m->approver, 300, 1, 0, err, errlen) ||
      check_text("identity", m->identity, 300, strcmp(m->kind, "preferences") == 0, 0, err, errlen))
    return -1;
  if (strcmp(m->kind, "knowledge") == 0 && m->identity) {
    util_seterr(err, errlen, "memory: a knowledge entry belongs to no identity");
    return -1;
  }
  return 0;
}

void memory_id_of(const char *key, char out[MEMORY_ID_MAX + 1]) {
  char hex[65];
  util_sha256_hex(key, strlen(key), hex);
  snprintf(out, MEMORY_ID_MAX + 1, "mem-%.24s", hex);
}

/* "KEY":VALUE, with VALUE JSON-quoted (null when NULL), after a comma when
 * not first. */
static void put_str(ubuf *b, const char *key, const char *v) {
  char *q = v ? json_quote(v) : NULL;
  char *kv = util_fmt(",\"%s\":%s", key, q ? q : "null");
  ubuf_add(b, kv, strlen(kv));
  free(kv);
  free(q);
}

char *memory_json(const memory_row *m) {
  ubuf b = {0};
  char *id = json_quote(m->id);
  char *head = util_fmt("{\"id\":%s", id);
  free(id);
  ubuf_add(&b, head, strlen(head));
  free(head);
  put_str(&b, "kind", m->kind);
  put_str(&b, "identity", m->identity);
  put_str(&b, "text", m->text);
  put_str(&b, "evidence", m->evidence);
  /* provenance: which session proposed it, in which request, who approved it and when */
  put_str(&b, "session_id", m->session_id);
  put_str(&b, "request_id", m->request_id);
  put_str(&b, "approver", m->approver);
  char *t = util_fmt(",\"approved_at\":%lld,\"revoked\":%s", (long long)m->approved_at,
                     m->revoked_at ? "true" : "false");
  ubuf_add(&b, t, strlen(t));
  free(t);
  if (m->revoked_at) {
    t = util_fmt(",\"revoked_at\":%lld", (long long)m->revoked_at);
    ubuf_add(&b, t, strlen(t));
    free(t);
    put_str(&b, "revoked_by", m->revoked_by);
    put_str(&b, "revoke_reason", m->revoke_reason);
  }
  ubuf_add(&b, "}", 2);
  return b.p;
}

int memory_record(store *st, const memory_row *m, char *err, size_t errlen) {
  if (memory_check(m, err, errlen) != 0) return -1;
  int rc = store_memory_put(st, m);
  if (rc < 0) util_seterr(err, errlen, "memory: cannot record entry %s: %s", m->id, store_errmsg(st));
  return rc;
}

typedef struct listing {
  int (*each)(void *ud, char *json);
  void *ud;
} listing;

static int list_row(void *ud, const memory_row *m) {
  listing *l = ud;
  return l->each(l->ud, memory_json(m));
}

int memory_list(store *st, const char *kind, const char *identity, int live_only,
                int (*each)(void *ud, char *json), void *ud, char *err, size_t errlen) {
  if (kind && !memory_kind_stored(kind)) {
    util_seterr(err, errlen, "unknown memory kind '%.40s' (knowledge or preferences)", kind);
    return -1;
  }
  listing l = {each, ud};
  if (store_memory_list(st, NULL, kind, identity, live_only, list_row, &l) != STORE_OK) {
    util_seterr(err, errlen, "cannot read the memory: %s", store_errmsg(st));
    return -1;
  }
  return 0;
}

/* The one entry a scan found (as JSON), and whether it is revoked. */
typedef struct one {
  char *json;
  int64_t revoked_at;
  char by[320];
} one;

static int one_row(void *ud, const memory_row *m) {
  one *o = ud;
  o->json = memory_json(m);
  o->revoked_at = m->revoked_at;
  snprintf(o->by, sizeof o->by, "%s", m->revoked_by ? m->revoked_by : "?");
  return 1;
}

/* The entry id into *o: 1, 0 when there is none, -1 when it cannot be read
 * (err says which). */
static int find_entry(store *st, const char *id, one *o, char *err, size_t errlen) {
  *o = (one){0};
  if (store_memory_list(st, id, NULL, NULL, 0, one_row, o) != STORE_OK) {
    util_seterr(err, errlen, "cannot read the memory: %s", store_errmsg(st));
    return -1;
  }
  if (!o->json) {
    util_seterr(err, errlen, "no memory entry '%.80s'", id);
    return 0;
  }
  return 1;
}

int memory_show(store *st, const char *id, char **json, char *err, size_t errlen) {
  one o;
  int found = find_entry(st, id, &o, err, errlen);
  *json = found == 1 ? o.json : NULL;
  return found;
}

int memory_revoke(store *st, const char *id, const char *by, const char *reason, int64_t at, char **json, char *err,
                  size_t errlen) {
  *json = NULL;
  if (reason && !*reason) reason = NULL;
  if (reason && check_text("reason", reason, MEMORY_REASON_MAX, 0, 1, err, errlen) != 0) return -1;
  one o;
  int found = find_entry(st, id, &o, err, errlen);
  if (found != 1) return found;
  free(o.json);
  if (o.revoked_at) {
    char when[32] = "?";
    time_t t = (time_t)(o.revoked_at / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    util_seterr(err, errlen, "memory entry %.80s was revoked already, by %s at %s", id, o.by, when);
    return 2;
  }
  int rc = store_memory_revoke(st, id, at, by, reason);
  if (rc < 0) {
    util_seterr(err, errlen, "cannot revoke memory entry %.80s: %s", id, store_errmsg(st));
    return -1;
  }
  if (rc == 0) { /* revoked in between, by another writer */
    util_seterr(err, errlen, "memory entry %.80s was revoked already", id);
    return 2;
  }
  o = (one){0};
  if (store_memory_list(st, id, NULL, NULL, 0, one_row, &o) != STORE_OK || !o.json) {
    util_seterr(err, errlen, "cannot read memory entry %.80s back: %s", id, store_errmsg(st));
    return -1;
  }
  *json = o.json;
  return 1;
}

/* ------------------------------------------------- the activity binding --- */

/* The entries of one kind a session reads: kept in a ring of the newest
 * MEMORY_READ_MAX. */
typedef struct reading {
  char *v[MEMORY_READ_MAX];
  int n, first;
} reading;

static int read_row(void *ud, char *json) {
  reading *r = ud;
  if (r->n < MEMORY_READ_MAX) {
    r->v[(r->first + r->n++) % MEMORY_READ_MAX] = json;
  } else {
    free(r->v[r->first]);
    r->v[r->first] = json;
    r->first = (r->first + 1) % MEMORY_READ_MAX;
  }
  return 0;
}

typedef struct kinds {
  int knowledge, preferences, bad;
} kinds;

static int kind_item(void *ud, const char *v, size_t vn) {
  kinds *k = ud;
  char *s = json_string(v, vn);
  if (s && strcmp(s, "knowledge") == 0) k->knowledge = 1;
  else if (s && strcmp(s, "preferences") == 0) k->preferences = 1;
  else if (!s || (strcmp(s, "instructions") != 0)) k->bad = 1; /* instructions come from the input's files */
  free(s);
  return 0;
}

static char *read_entries(store *st, const char *args, size_t n, char *err, size_t errlen) {
  kinds k = {0};
  const char *v;
  size_t vn;
  if (json_get(args, n, "kinds", &v, &vn) != 1 || json_each(v, vn, kind_item, &k) != 0 || k.bad) {
    util_seterr(err, errlen, "memory read: kinds must be a list of instructions, knowledge and preferences");
    return NULL;
  }
  char *identity = json_get_string(args, n, "identity");
  ubuf b = {0};
  ubuf_add(&b, "{\"entries\":[", 12);
  int count = 0, rc = 0;
  const char *which[2] = {k.knowledge ? "knowledge" : NULL, k.preferences && identity ? "preferences" : NULL};
  for (int i = 0; i < 2 && rc == 0; i++) {
    if (!which[i]) continue;
    reading r = {0};
    rc = memory_list(st, which[i], i == 1 ? identity : NULL, 1, read_row, &r, err, errlen);
    for (int j = 0; j < r.n; j++) {
      char *e = r.v[(r.first + j) % MEMORY_READ_MAX];
      if (count++) ubuf_add(&b, ",", 1);
      ubuf_add(&b, e, strlen(e));
      free(e);
    }
  }
  free(identity);
  if (rc != 0) {
    ubuf_free(&b);
    return NULL;
  }
  ubuf_add(&b, "]}", 3);
  return b.p;
}

static char *record_entry(store *st, const char *args, size_t n, char *err, size_t errlen) {
  char *key = json_get_string(args, n, "key");
  char id[MEMORY_ID_MAX + 1];
  if (!key || !*key) {
    free(key);
    util_seterr(err, errlen, "memory record: key is required");
    return NULL;
  }
  memory_id_of(key, id);
  free(key);
  char *f[7];
  const char *names[7] = {"kind", "identity", "text", "evidence", "session_id", "request_id", "approver"};
  for (int i = 0; i < 7; i++) f[i] = json_get_string(args, n, names[i]);
  memory_row m = {id, f[0], f[1], f[2], f[3], f[4], f[5], f[6], json_get_int(args, n, "approved_at", 0), 0, NULL,
                  NULL};
  char *out = NULL;
  int rc = m.approved_at > 0 ? memory_record(st, &m, err, errlen)
                             : (util_seterr(err, errlen, "memory record: approved_at is required"), -1);
  if (rc >= 0) {
    /* the entry as stored: a rerun finds the first attempt's */
    char *stored = NULL;
    if (memory_show(st, id, &stored, err, errlen) == 1) {
      out = util_fmt("{\"written\":%s,\"entry\":%s}", rc == 1 ? "true" : "false", stored);
      free(stored);
    }
  }
  for (int i = 0; i < 7; i++) free(f[i]);
  return out;
}

char *memory_call(store *st, const char *op, const char *args, size_t n, char *err, size_t errlen) {
  if (!st) {
    util_seterr(err, errlen, "memory: no database here");
    return NULL;
  }
  if (strcmp(op, "read") == 0) return read_entries(st, args, n, err, errlen);
  if (strcmp(op, "record") == 0) return record_entry(st, args, n, err, errlen);
  util_seterr(err, errlen, "memory: unknown call '%.40s' (read or record)", op);
  return NULL;
}
