/* chain: each workflow's two hash chains (its history through all its runs,
 * and its domain events), once for both backends: the canonical bytes of an
 * event and their SHA-256, the heads the open batch moved (written to the
 * workflow's head row, chain_heads, at its commit), and the checks of what a
 * read returns.
 * docs/durability.md#the-hash-chain says what they prove and what not.
 *
 * The canonical bytes (all integers big-endian, 8 bytes, two's complement;
 * each text field 0x00 when NULL, else 0x01, its length in 4 bytes and its
 * bytes, as UTF-8 with any invalid part replaced by U+FFFD):
 *   history: "engine.history.v1" 0x00, the previous link (32 bytes, zeros
 *            for the first), wf_id, run, seq, type, ref, name, hash,
 *            payload, time
 *   domain:  "engine.domain.v1" 0x00, the previous link, session_id, seq,
 *            type, time, payload
 * and an event's link is their SHA-256. The chain runs on full links (each
 * recomputed from the bytes when read) and the heads are kept whole (64
 * lowercase hex digits); each event keeps only its link's first
 * CHAIN_KEPT hex digits (64 bits), which is what names the first event that
 * does not match: a whole link per event made W1's history a third larger
 * and cost more than all the hashing (docs/durability.md#the-hash-chain).
 *
 * One chain for the history and one for the domain events, not one for
 * both: they have different writers. A workflow's history is written only by
 * whoever runs it (the lease holder; its creator for the first event), so
 * its head can be kept in memory from one batch to the next; its domain
 * events are also written by clients (who signalled, who approved) under
 * the event feed's lock (PostgreSQL), each reading the head the last commit
 * left. One chain would make every client write wait on, and read, the
 * worker's head.
 *
 * The history chain runs through the runs of a workflow: a run's first
 * event links to the last one of the run before, whose link the workflow's
 * row keeps as the run's base (hist_base), so the current run is checked
 * without reading the others. Nothing here calls a backend: the backends
 * read and write the rows, this file says what to write and whether what
 * was read is whole. */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "util.h"

/* The hex digits of its link an event keeps (its row's chain column). */
#define CHAIN_KEPT 16

/* ---- the canonical bytes and their hash ---- */

static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;
static void sha256_fetch(void) {
  sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

/* Fields go through a small buffer, so a short event is one digest update;
 * a long text field goes straight to the digest. */
typedef struct enc {
  EVP_MD_CTX *md;
  unsigned char buf[256];
  size_t n;
} enc;

static void enc_flush(enc *w) {
  if (w->n) EVP_DigestUpdate(w->md, w->buf, w->n);
  w->n = 0;
}

static void enc_bytes(enc *w, const void *p, size_t n) {
  if (w->n + n > sizeof w->buf) enc_flush(w);
  if (n > sizeof w->buf / 2) {
    EVP_DigestUpdate(w->md, p, n);
    return;
  }
  memcpy(w->buf + w->n, p, n);
  w->n += n;
}

static void enc_int(enc *w, int64_t v) {
  unsigned char b[8];
  uint64_t u = (uint64_t)v;
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(u >> (56 - 8 * i));
  enc_bytes(w, b, 8);
}

/* Whether t[0..n) is all ASCII (the common case: nothing to repair), eight
 * bytes at a time. */
static int ascii(const char *t, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    memcpy(&v, t + i, 8);
    if (v & 0x8080808080808080ULL) return 0;
  }
  for (; i < n; i++)
    if ((unsigned char)t[i] & 0x80) return 0;
  return 1;
}

static void enc_text(enc *w, const char *t) {
  unsigned char b[5] = {0};
  if (!t) {
    enc_bytes(w, b, 1);
    return;
  }
  size_t n = strlen(t), fn;
  /* as PostgreSQL keeps it: any part that is not UTF-8 as U+FFFD (SQLite
   * keeps the bytes; either way the link is the same, on both stores) */
  char *fixed = ascii(t, n) ? NULL : util_utf8_repair(t, n, &fn);
  if (fixed) t = fixed, n = fn;
  b[0] = 1;
  for (int i = 0; i < 4; i++) b[1 + i] = (unsigned char)((uint32_t)n >> (24 - 8 * i));
  enc_bytes(w, b, 5);
  enc_bytes(w, t, n);
  free(fixed);
}

static int hexval(int c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* A link as the chain runs on it: its 32 bytes, kept so, not as hex, from
 * one event to the next (the hex is written only at a commit); or, for a
 * link read from a row that is not 64 hex digits, that text, hashed as what
 * it is so it never matches. none: the chain's first event links to
 * nothing (32 zero bytes). */
typedef struct link {
  int none;
  unsigned char d[32];
  char odd[65];
} link;

static void link_none(link *l) {
  l->none = 1;
  l->odd[0] = 0;
}

/* A link as a row or a caller has it: NULL or "" for none. */
static void link_parse(link *l, const char *hex) {
  l->odd[0] = 0;
  l->none = !hex || !*hex;
  if (l->none) return;
  size_t n = strlen(hex);
  for (int i = 0; n == 64 && i < 32; i++) {
    int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) break;
    l->d[i] = (unsigned char)(hi << 4 | lo);
    if (i == 31) return;
  }
  snprintf(l->odd, sizeof l->odd, "%s", hex);
}

static void hex_of(const unsigned char *d, size_t n, char *out) {
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15];
  }
  out[2 * n] = 0;
}

/* The link as a row keeps it: 64 lowercase hex digits ("" for none). */
static void link_hex(const link *l, char out[65]) {
  if (l->none)
    out[0] = 0;
  else if (l->odd[0])
    memcpy(out, l->odd, 65);
  else
    hex_of(l->d, 32, out);
}

/* The part of a computed link an event keeps, into out (CHAIN_KEPT + 1 bytes). */
static void kept(const link *l, char *out) { hex_of(l->d, CHAIN_KEPT / 2, out); }

/* An event's kept link is the start of the one computed for it. */
static int kept_matches(const link *got, const char *stored) {
  char k[CHAIN_KEPT + 1];
  kept(got, k);
  return strlen(stored) == CHAIN_KEPT && memcmp(k, stored, CHAIN_KEPT) == 0;
}

/* The previous link: 32 zero bytes for none; one that is not 64 hex digits
 * as its text. */
static void enc_prev(enc *w, const link *prev) {
  static const unsigned char zeros[32];
  if (prev->none)
    enc_bytes(w, zeros, 32);
  else if (prev->odd[0])
    enc_bytes(w, prev->odd, strlen(prev->odd));
  else
    enc_bytes(w, prev->d, 32);
}

static void enc_start(enc *w, EVP_MD_CTX *md, const char *tag, const link *prev) {
  pthread_once(&sha256_once, sha256_fetch);
  w->md = md;
  w->n = 0;
  EVP_DigestInit_ex2(md, sha256_md, NULL);
  enc_bytes(w, tag, strlen(tag) + 1); /* with its NUL */
  enc_prev(w, prev);
}

static void enc_end(enc *w, link *out) {
  enc_flush(w);
  unsigned int dn = 0;
  EVP_DigestFinal_ex(w->md, out->d, &dn);
  out->none = 0;
  out->odd[0] = 0;
}

static void hist_link(EVP_MD_CTX *md, const link *prev, const char *wf_id, int64_t run, const hist_event *e,
                      link *out) {
  enc w;
  enc_start(&w, md, "engine.history.v1", prev);
  enc_text(&w, wf_id);
  enc_int(&w, run);
  enc_int(&w, e->seq);
  enc_text(&w, e->type);
  enc_int(&w, e->ref);
  enc_text(&w, e->name);
  enc_text(&w, e->hash);
  enc_text(&w, e->payload);
  enc_int(&w, e->time);
  enc_end(&w, out);
}

static void domain_link(EVP_MD_CTX *md, const link *prev, const domain_event *e, link *out) {
  enc w;
  enc_start(&w, md, "engine.domain.v1", prev);
  enc_text(&w, e->session_id);
  enc_int(&w, e->seq);
  enc_text(&w, e->type);
  enc_int(&w, e->time);
  enc_text(&w, e->payload);
  enc_end(&w, out);
}

void store_chain_hist(const char *prev, const char *wf_id, int64_t run, const hist_event *e, char out[65]) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  link p, l;
  link_parse(&p, prev);
  hist_link(md, &p, wf_id, run, e, &l);
  link_hex(&l, out);
  EVP_MD_CTX_free(md);
}

void store_chain_domain(const char *prev, const domain_event *e, char out[65]) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  link p, l;
  link_parse(&p, prev);
  domain_link(md, &p, e, &l);
  link_hex(&l, out);
  EVP_MD_CTX_free(md);
}

/* ---- the heads this store knows: the open batch's, and the history heads
 * it committed (a workflow's history has one writer at a time: its lease
 * holder). A committed head is used only for the event right after it: one
 * another worker wrote past since is not, and the row is read instead (an
 * event once committed is never replaced, so a head that is the event
 * before is still the head, whoever held the lease in between). ---- */

typedef struct chain_entry {
  char *id;
  /* history: known when read from the row or written by this store */
  int hist_known, hist_dirty;
  int64_t run, seq; /* the head's place; seq 0: nothing chained yet */
  link head;        /* none when seq is 0 */
  char base[65];
  int64_t from_run, from_seq;
  /* domain events: only while the open batch appends to them */
  int dom_dirty;
  int64_t dseq;
  link dhead;
} chain_entry;

struct chain_cache {
  strmap by_id;        /* wf_id -> chain_entry */
  chain_entry **dirty; /* the entries the open batch changed, in order */
  size_t ndirty, capdirty;
  EVP_MD_CTX *md;
};

/* Committed history heads kept at most (a few hundred bytes each): past
 * it the clean ones go, and are read from the rows again when needed. */
#define CHAIN_CACHE_MAX 50000

static struct chain_cache *cache(store *s) {
  if (!s->chains) {
    s->chains = util_xcalloc(1, sizeof *s->chains);
    strmap_init(&s->chains->by_id);
    s->chains->md = EVP_MD_CTX_new();
  }
  return s->chains;
}

static void entry_free(void *p) {
  chain_entry *e = p;
  if (!e) return;
  free(e->id);
  free(e);
}

void chain_cache_free(store *s) {
  struct chain_cache *c = s->chains;
  if (!c) return;
  strmap_clear(&c->by_id, entry_free);
  strmap_free(&c->by_id);
  free(c->dirty);
  EVP_MD_CTX_free(c->md);
  free(c);
  s->chains = NULL;
}

/* Drops every clean entry (the cache is full). */
static void trim(struct chain_cache *c) {
  strmap keep;
  strmap_init(&keep);
  for (size_t i = 0; i < c->by_id.cap; i++) {
    if (!STRMAP_LIVE(&c->by_id, i)) continue;
    chain_entry *e = c->by_id.vals[i];
    if (e->hist_dirty || e->dom_dirty)
      strmap_put(&keep, e->id, e);
    else
      entry_free(e);
  }
  strmap_free(&c->by_id);
  c->by_id = keep;
}

static chain_entry *entry(store *s, const char *wf_id, int create) {
  struct chain_cache *c = cache(s);
  chain_entry *e = strmap_get(&c->by_id, wf_id);
  if (e || !create) return e;
  if (c->by_id.len >= CHAIN_CACHE_MAX) trim(c);
  e = util_xcalloc(1, sizeof *e);
  e->id = util_strdup(wf_id);
  strmap_put(&c->by_id, wf_id, e);
  return e;
}

static void mark_dirty(struct chain_cache *c, chain_entry *e) {
  if (e->hist_dirty || e->dom_dirty) return; /* listed already */
  if (c->ndirty == c->capdirty) {
    c->capdirty = c->capdirty ? c->capdirty * 2 : 64;
    c->dirty = util_xrealloc(c->dirty, c->capdirty * sizeof *c->dirty);
  }
  c->dirty[c->ndirty++] = e;
}

static void copy_hex(char dst[65], const char *src) {
  snprintf(dst, 65, "%s", src ? src : "");
}

int chain_hist_link(store *s, const char *wf_id, int64_t run, const hist_event *e, const chain_state *row,
                    char out[65]) {
  struct chain_cache *c = cache(s);
  chain_entry *h = entry(s, wf_id, 0);
  if (run == 1 && e->seq == 1) { /* a new workflow: its chain starts here */
    if (!h) h = entry(s, wf_id, 1);
    h->hist_known = 1;
    h->run = h->seq = 0;
    link_none(&h->head);
    h->base[0] = 0;
    h->from_run = h->from_seq = 1;
  } else if (row && !(h && h->hist_dirty)) { /* the head as the workflow's row has it */
    /* the event after it, in the row's run (or a new run's first): one
     * further on follows events the head row does not reach (a history
     * out of step with it), and would be linked to the wrong one */
    if (row->found && row->hist_head[0] && run == row->run && e->seq > 1 &&
        e->seq != (row->hist_seq > 0 ? row->hist_seq : 1) + 1)
      return -1;
    if (!h) h = entry(s, wf_id, 1);
    h->hist_known = 1;
    h->run = row->run;
    h->seq = row->hist_head[0] ? (row->hist_seq > 0 ? row->hist_seq : 1) : 0;
    link_parse(&h->head, h->seq ? row->hist_head : NULL);
    copy_hex(h->base, row->hist_base);
    h->from_run = row->hist_from_run;
    h->from_seq = row->hist_from_seq;
  } else if (!h || !h->hist_known) {
    return 0;
  } else if (!h->hist_dirty && !(e->seq == 1 ? h->run < run : h->run == run && h->seq == e->seq - 1)) {
    return 0; /* a head this store committed earlier that is not the event before: the row says */
  }
  /* the first event of the chain (a new workflow, or the first after the
   * upgrade) links to nothing; a run's first to the run before */
  if (h->seq == 0) link_none(&h->head);
  link l;
  hist_link(c->md, &h->head, wf_id, run, e, &l);
  mark_dirty(c, h);
  if (e->seq == 1 && run > 1) link_hex(&h->head, h->base);
  h->hist_dirty = 1;
  h->run = run;
  h->seq = e->seq;
  h->head = l;
  kept(&l, out);
  return 1;
}

void chain_hist_first_head(const char *wf_id, int64_t run, const hist_event *e, char out[65], char head[65]) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  link none, l;
  link_none(&none);
  hist_link(md, &none, wf_id, run, e, &l);
  EVP_MD_CTX_free(md);
  kept(&l, out);
  if (head) link_hex(&l, head);
}

void chain_hist_first(const char *wf_id, int64_t run, const hist_event *e, char out[65]) {
  chain_hist_first_head(wf_id, run, e, out, NULL);
}

int chain_dom_pending(store *s, const char *session_id, int64_t *seq, char head[65]) {
  chain_entry *h = s->chains ? strmap_get(&s->chains->by_id, session_id) : NULL;
  if (!h || !h->dom_dirty) return 0;
  *seq = h->dseq;
  link_hex(&h->dhead, head);
  return 1;
}

void chain_dom_link(store *s, const domain_event *e, const char *prev, char out[65]) {
  struct chain_cache *c = cache(s);
  link p;
  link_parse(&p, prev);
  chain_entry *h = entry(s, e->session_id, 1);
  domain_link(c->md, &p, e, &h->dhead);
  mark_dirty(c, h);
  h->dom_dirty = 1;
  h->dseq = e->seq;
  kept(&h->dhead, out);
}

int chain_flush(store *s, chain_write_fn write) {
  struct chain_cache *c = s->chains;
  if (!c) return STORE_OK;
  char hex[65];
  for (size_t i = 0; i < c->ndirty; i++) {
    chain_entry *h = c->dirty[i];
    if (h->hist_dirty && (link_hex(&h->head, hex), write(s, h->id, 0, hex, h->seq, h->base)) != STORE_OK)
      return STORE_ERR;
    if (h->dom_dirty && (link_hex(&h->dhead, hex), write(s, h->id, 1, hex, h->dseq, NULL)) != STORE_OK)
      return STORE_ERR;
  }
  return STORE_OK;
}

void chain_committed(store *s) {
  struct chain_cache *c = s->chains;
  if (!c) return;
  for (size_t i = 0; i < c->ndirty; i++) c->dirty[i]->hist_dirty = c->dirty[i]->dom_dirty = 0;
  c->ndirty = 0;
}

void chain_rolled_back(store *s) {
  struct chain_cache *c = s->chains;
  if (!c) return;
  /* what the batch moved is gone with it: those heads are read again */
  for (size_t i = 0; i < c->ndirty; i++) entry_free(strmap_del(&c->by_id, c->dirty[i]->id));
  c->ndirty = 0;
}

void chain_overlay(store *s, const char *wf_id, chain_state *cs) {
  chain_entry *h = s->chains ? strmap_get(&s->chains->by_id, wf_id) : NULL;
  if (!h || !cs->found) return;
  if (h->hist_dirty) {
    cs->run = h->run > cs->run ? h->run : cs->run;
    cs->hist_seq = h->seq;
    link_hex(&h->head, cs->hist_head);
    copy_hex(cs->hist_base, h->base);
  }
  if (h->dom_dirty) {
    cs->dom_seq = h->dseq;
    link_hex(&h->dhead, cs->dom_head);
  }
}

/* ---- the checks of what was read ---- */

static int damaged(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int damaged(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return STORE_ECORRUPT;
}

/* "run 2 " for a workflow past its first run, "" for its first. */
static const char *run_label(int64_t run, char buf[40]) {
  if (run > 1)
    snprintf(buf, 40, "run %lld ", (long long)run);
  else
    buf[0] = 0;
  return buf;
}

int chain_check_run(store *s, const char *wf_id, int64_t run, const hist_list *h, size_t from, const chain_state *cs,
                    const char *prev, chain_tally *t, char *err, size_t errlen) {
  char rl[40];
  run_label(run, rl);
  if (t) t->last[0] = 0;
  /* dense from 1: a hole is damage, never a shorter history */
  for (size_t i = from; i < h->n; i++)
    if (h->v[i].seq != (int64_t)(i - from) + 1)
      return damaged(err, errlen, "the history of %s is damaged: %sevent #%lld is missing", wf_id, rl,
                     (long long)(i - from) + 1);
  if (!cs->found) return STORE_OK; /* no row (gone meanwhile): nothing to check against */
  if (run < cs->hist_from_run) {   /* older than the chain */
    if (t) t->unchained += (int64_t)(h->n - from);
    return STORE_OK;
  }
  int64_t start = run == cs->hist_from_run ? cs->hist_from_seq : 1;
  /* the run's first link follows nothing (the chain's start), the row's base
   * (the current run) or what the caller says (an older run: the end of the
   * run before it) */
  const char *first = "";
  if (run > cs->hist_from_run) {
    if (run == cs->run)
      first = cs->hist_base;
    else if (run < cs->run && prev)
      first = prev;
    else { /* not damage: to be read again */
      damaged(err, errlen, "the history of %s changed while it was read (run %lld; its row says run %lld)", wf_id,
              (long long)run, (long long)cs->run);
      return STORE_ERR;
    }
    if (!first[0] && h->n > from)
      return damaged(err, errlen, "the history of %s is damaged: %sevent #1 has no link to the run before", wf_id, rl);
  }
  EVP_MD_CTX *md = cache(s)->md;
  link at, got;
  link_parse(&at, first);
  char hex[65];
  int64_t last = 0;
  for (size_t i = from; i < h->n; i++) {
    const hist_event *e = &h->v[i];
    if (e->seq < start) {
      if (t) t->unchained++;
      continue;
    }
    if (!e->chain)
      return damaged(err, errlen, "the history of %s is damaged: %sevent #%lld has no hash (altered)", wf_id, rl,
                     (long long)e->seq);
    hist_link(md, &at, wf_id, run, e, &got);
    if (!kept_matches(&got, e->chain))
      return damaged(err, errlen,
                     "the history of %s is damaged: %sevent #%lld does not match its hash (altered, reordered or "
                     "replaced)",
                     wf_id, rl, (long long)e->seq);
    at = got;
    last = e->seq;
    if (t) t->checked++;
    /* the row was read before the events: the head it names is among them
     * (any after it were appended since, and chain on from it) */
    if (run == cs->run && e->seq == cs->hist_seq && cs->hist_head[0] &&
        (link_hex(&got, hex), strcmp(hex, cs->hist_head) != 0))
      return damaged(err, errlen,
                     "the history of %s is damaged: %sevent #%lld is not the head recorded for its workflow", wf_id,
                     rl, (long long)e->seq);
  }
  if (t) link_hex(&at, t->last);
  if (run != cs->run) return STORE_OK; /* an older run's end: the next run's first link checks it */
  if (cs->snapshot && cs->hist_head[0] && last > cs->hist_seq)
    return damaged(err, errlen,
                   "the history of %s is damaged: %sevent #%lld is past the head recorded for its workflow (#%lld)",
                   wf_id, rl, (long long)cs->hist_seq + 1, (long long)cs->hist_seq);
  if (cs->hist_head[0] && last < cs->hist_seq)
    return damaged(err, errlen,
                   "the history of %s is damaged: %sevent #%lld is missing (the history ends at #%lld; the "
                   "head recorded for its workflow is #%lld)",
                   wf_id, rl, (long long)last + 1, (long long)last, (long long)cs->hist_seq);
  /* a chain that starts at a run's first event (a workflow made with the
   * chain: run 1, or a fork's run) has a head from its first commit on (an
   * upgraded one has none until its first event after the upgrade) */
  if (!cs->hist_head[0] && cs->hist_from_seq == 1)
    return damaged(err, errlen, "the history of %s is damaged: no head is recorded for its workflow", wf_id);
  return STORE_OK;
}

void chain_learned(store *s, const char *wf_id, int64_t run, const hist_list *h, const chain_state *cs,
                   const char *last) {
  chain_entry *e = entry(s, wf_id, 0);
  if (e && e->hist_dirty) return;
  if (!cs->found || run != cs->run || !h->n || !h->v[h->n - 1].chain || !last[0]) return;
  e = entry(s, wf_id, 1);
  e->hist_known = 1;
  e->run = run;
  e->seq = h->v[h->n - 1].seq;
  link_parse(&e->head, last);
  copy_hex(e->base, cs->hist_base);
  e->from_run = cs->hist_from_run;
  e->from_seq = cs->hist_from_seq;
}

int chain_check_domain(store *s, const char *session_id, const domain_event *v, size_t n, const chain_state *cs,
                       chain_tally *t, char *err, size_t errlen) {
  for (size_t i = 0; i < n; i++)
    if (v[i].seq != (int64_t)i + 1)
      return damaged(err, errlen, "the events of %s are damaged: event #%lld is missing", session_id,
                     (long long)i + 1);
  if (!cs->found) return STORE_OK;
  link at, got;
  link_none(&at);
  char hex[65];
  int64_t last = 0;
  EVP_MD_CTX *md = cache(s)->md;
  for (size_t i = 0; i < n; i++) {
    const domain_event *e = &v[i];
    last = e->seq;
    if (e->seq < cs->dom_from) {
      if (t) t->unchained++;
      continue;
    }
    if (!e->chain)
      return damaged(err, errlen, "the events of %s are damaged: event #%lld has no hash (altered)", session_id,
                     (long long)e->seq);
    domain_link(md, &at, e, &got);
    if (!kept_matches(&got, e->chain))
      return damaged(err, errlen,
                     "the events of %s are damaged: event #%lld does not match its hash (altered, reordered or "
                     "replaced)",
                     session_id, (long long)e->seq);
    if (t) t->checked++;
    at = got;
    if (e->seq == cs->dom_seq && cs->dom_head[0] && (link_hex(&got, hex), strcmp(hex, cs->dom_head) != 0))
      return damaged(err, errlen,
                     "the events of %s are damaged: event #%lld is not the head recorded for them", session_id,
                     (long long)e->seq);
  }
  if (cs->snapshot && cs->dom_head[0] && last > cs->dom_seq)
    return damaged(err, errlen, "the events of %s are damaged: event #%lld is past the head recorded for them (#%lld)",
                   session_id, (long long)cs->dom_seq + 1, (long long)cs->dom_seq);
  if (cs->dom_head[0] && last < cs->dom_seq)
    return damaged(err, errlen,
                   "the events of %s are damaged: event #%lld is missing (they end at #%lld; the head recorded "
                   "for them is #%lld)",
                   session_id, (long long)last + 1, (long long)last, (long long)cs->dom_seq);
  return STORE_OK;
}
