/* migrate: see migrate.h. The copy goes through store.h's whole-table
 * operations, so it holds no SQL and works either way round. */
#include "migrate.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "dbfile.h"
#include "store.h"
#include "util.h"

#define PAGE 1000 /* rows read at a time: memory stays bounded by a page */

/* A table's rows in key order, fed to a SHA-256 one value at a time:
 * type, then the value (an integer as 8 bytes, a real as %.17g, text and
 * blobs with their length), so both backends' rows hash alike. */
typedef struct digest {
  EVP_MD_CTX *md;
  int64_t rows;
} digest;

static void digest_row(digest *d, const store_table *t, const store_value *row) {
  for (int i = 0; i < t->ncolumns; i++) {
    const store_value *v = &row[i];
    unsigned char tag = (unsigned char)v->type, num[8];
    EVP_DigestUpdate(d->md, &tag, 1);
    uint64_t u = v->type == STORE_V_INT ? (uint64_t)v->i : (uint64_t)v->n;
    if (v->type == STORE_V_REAL) {
      char text[40];
      int n = snprintf(text, sizeof text, "%.17g", v->r);
      EVP_DigestUpdate(d->md, text, (size_t)n);
      continue;
    }
    if (v->type == STORE_V_NULL) continue;
    for (int b = 0; b < 8; b++) num[b] = (unsigned char)(u >> (56 - 8 * b));
    EVP_DigestUpdate(d->md, num, 8);
    if (v->type == STORE_V_TEXT || v->type == STORE_V_BLOB) EVP_DigestUpdate(d->md, v->p, v->n);
  }
  d->rows++;
}

/* The key of the last row read, owned (a page's values die with the page). */
typedef struct cursor {
  store_value key[8];
  char *owned[8];
  int nkey;
} cursor;

static void cursor_set(cursor *c, const store_table *t, const store_value *row) {
  c->nkey = t->nkey;
  for (int i = 0; i < t->nkey; i++) {
    free(c->owned[i]);
    c->owned[i] = NULL;
    c->key[i] = row[i];
    if (row[i].type == STORE_V_TEXT || row[i].type == STORE_V_BLOB) {
      c->owned[i] = util_xmalloc(row[i].n + 1);
      memcpy(c->owned[i], row[i].p, row[i].n);
      c->owned[i][row[i].n] = 0; /* text stays NUL-terminated, as the stores bind it */
      c->key[i].p = c->owned[i];
    }
  }
}

static void cursor_free(cursor *c) {
  for (int i = 0; i < 8; i++) free(c->owned[i]);
  memset(c, 0, sizeof *c);
}

typedef struct pass {
  const store_table *t;
  store *to; /* NULL: only digest */
  digest d;
  cursor c;
  int failed;
} pass;

static int on_row(void *ud, const store_value *row) {
  pass *p = ud;
  /* each backend's schema has its own version (PostgreSQL's has leases): the
   * target keeps its own, neither copied nor compared */
  if (strcmp(p->t->name, "meta") == 0 && row[0].type == STORE_V_TEXT && row[0].n == 14 &&
      memcmp(row[0].p, "schema_version", 14) == 0) {
    cursor_set(&p->c, p->t, row);
    return 0;
  }
  /* meta: the target's own values (its instance id) give way to the source's */
  if (p->to && store_table_insert(p->to, p->t, row, strcmp(p->t->name, "meta") == 0) != STORE_OK) {
    p->failed = 1;
    return 1;
  }
  if (p->to) crash_point("migrate.row"); /* the crash tests: a copy cut short */
  digest_row(&p->d, p->t, row);
  cursor_set(&p->c, p->t, row);
  return 0;
}

/* Reads table t of from page by page (copying each row into to when not
 * NULL) into hex (its SHA-256) and *rows. -1 with err. */
static int table_pass(store *from, store *to, const store_table *t, char hex[65], int64_t *rows, char *err,
                      size_t errlen, const char *from_shown, const char *to_shown) {
  pass p = {t, to, {EVP_MD_CTX_new(), 0}, {{{0}}, {0}, 0}, 0};
  if (!p.d.md || !EVP_DigestInit_ex(p.d.md, EVP_sha256(), NULL)) {
    EVP_MD_CTX_free(p.d.md);
    util_seterr(err, errlen, "SHA-256 is not available");
    return -1;
  }
  int n;
  do {
    n = store_table_page(from, t, p.c.nkey ? p.c.key : NULL, PAGE, on_row, &p);
  } while (n == PAGE && !p.failed);
  int rc = 0;
  if (p.failed) {
    util_seterr(err, errlen, "writing into %s: %s", to_shown, store_errmsg(to));
    rc = -1;
  } else if (n < 0) {
    util_seterr(err, errlen, "reading %s: %s", from_shown, store_errmsg(from));
    rc = -1;
  }
  unsigned char md[32];
  unsigned len = 0;
  EVP_DigestFinal_ex(p.d.md, md, &len);
  EVP_MD_CTX_free(p.d.md);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
  *rows = p.d.rows;
  cursor_free(&p.c);
  return rc;
}

/* Both paths name one database (one file by two names, or one URL). */
static int same_database(const char *a, const char *b) {
  if (strcmp(a, b) == 0) return 1;
  if (store_is_url(a) || store_is_url(b)) return 0;
  char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
  int same = ra && rb && strcmp(ra, rb) == 0;
  free(ra);
  free(rb);
  return same;
}

static int lock_both(const char *from, const char *to, int fds[2], const char *shown[2], char *err, size_t errlen) {
  const char *db[2] = {from, to};
  fds[0] = fds[1] = -1;
  for (int i = 0; i < 2; i++) {
    char holder[256];
    fds[i] = engine_lock(db[i], "migrate", holder, sizeof holder);
    if (fds[i] < 0) {
      util_seterr(err, errlen, "%s is in use (%s): stop its worker before moving it", shown[i], holder);
      if (i == 1) engine_unlock(fds[0]);
      return -1;
    }
  }
  return 0;
}

int migrate_copy(const char *from, const char *to, FILE *out, char *err, size_t errlen) {
  char fbuf[512], tbuf[512];
  const char *shown[2] = {engine_db_shown(from, fbuf, sizeof fbuf), engine_db_shown(to, tbuf, sizeof tbuf)};
  if (same_database(from, to)) {
    util_seterr(err, errlen, "--from and --to are the same database (%s)", shown[0]);
    return -1;
  }
  if (engine_db_missing(from)) {
    util_seterr(err, errlen, "no database at %s (--from)", shown[0]);
    return -1;
  }
  int fds[2];
  if (lock_both(from, to, fds, shown, err, errlen)) return -1;
  store *src = NULL, *dst = NULL;
  char why[512];
  int rc = -1;
  if (store_open(from, 1, &src, why, sizeof why) != STORE_OK) {
    util_seterr(err, errlen, "%s", why);
    goto done;
  }
  if (store_open(to, 0, &dst, why, sizeof why) != STORE_OK) {
    util_seterr(err, errlen, "%s", why);
    goto done;
  }
  /* only into an empty database: a merge could not keep ids and sequences */
  for (int i = 0; i < store_ntables; i++) {
    const store_table *t = &store_tables[i];
    if (strcmp(t->name, "meta") == 0) continue; /* made by opening it */
    int64_t n = store_table_count(dst, t);
    if (n < 0) {
      util_seterr(err, errlen, "reading %s: %s", shown[1], store_errmsg(dst));
      goto done;
    }
    if (n > 0) {
      util_seterr(err, errlen,
                  "%s is not empty (table %s has %lld rows): engine migrate copies only into an empty database",
                  shown[1], t->name, (long long)n);
      goto done;
    }
  }
  char hex[STORE_TABLES_MAX][65];
  int64_t rows[STORE_TABLES_MAX], total = 0;
  for (int i = 0; i < store_ntables; i++) {
    const store_table *t = &store_tables[i];
    int failed = table_pass(src, dst, t, hex[i], &rows[i], err, errlen, shown[0], shown[1]);
    if (!failed && store_table_finish(dst, t) != STORE_OK) {
      util_seterr(err, errlen, "writing into %s: %s", shown[1], store_errmsg(dst));
      failed = 1;
    }
    if (failed) {
      store_rollback(dst);
      size_t len = strlen(err);
      util_seterr(err + len, errlen - len, "; nothing was written to %s", shown[1]);
      goto done;
    }
    total += rows[i];
  }
  crash_point("migrate.copied");
  if (store_commit(dst) != STORE_OK) {
    util_seterr(err, errlen, "committing into %s: %s; nothing was written to it", shown[1], store_errmsg(dst));
    store_rollback(dst);
    goto done;
  }
  /* read back what was committed, table by table, and compare */
  fprintf(out, "%-14s %10s  %s\n", "TABLE", "ROWS", "SHA-256 (source = target)");
  for (int i = 0; i < store_ntables; i++) {
    char back[65];
    int64_t n;
    if (table_pass(dst, NULL, &store_tables[i], back, &n, err, errlen, shown[1], shown[1])) goto done;
    if (n != rows[i] || strcmp(back, hex[i]) != 0) {
      util_seterr(err, errlen,
                  "the copy in %s differs from %s in table %s (%lld rows, SHA-256 %.16s; the source has %lld, %.16s): "
                  "the target was written, do not use it",
                  shown[1], shown[0], store_tables[i].name, (long long)n, back, (long long)rows[i], hex[i]);
      goto done;
    }
    fprintf(out, "%-14s %10lld  %s\n", store_tables[i].name, (long long)n, hex[i]);
  }
  fprintf(out, "engine: copied %lld rows of %d tables from %s to %s; every table's count and SHA-256 match\n",
          (long long)total, store_ntables, shown[0], shown[1]);
  rc = 0;
done:
  if (src) store_close(src);
  if (dst) store_close(dst);
  engine_unlock(fds[0]);
  engine_unlock(fds[1]);
  return rc;
}

int migrate_schema(const char *db, FILE *out, char *err, size_t errlen) {
  char buf[512], why[512];
  const char *shown = engine_db_shown(db, buf, sizeof buf);
  store *st;
  if (store_open(db, 0, &st, why, sizeof why) != STORE_OK) {
    util_seterr(err, errlen, "%s", why);
    return -1;
  }
  char *version = NULL;
  int found = store_meta_get(st, "schema_version", &version);
  if (found != 1) {
    util_seterr(err, errlen, "%s has no schema version after opening it: %s", shown,
                found < 0 ? store_errmsg(st) : "not set");
    store_close(st);
    return -1;
  }
  fprintf(out, "engine: %s is at schema version %s (this engine's)\n", shown, version);
  free(version);
  store_close(st);
  return 0;
}
