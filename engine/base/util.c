#include "util.h"

#include <errno.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "fatal.h"

static int64_t (*virtual_clock)(void *ud);
static void *virtual_clock_ud;

void util_set_clock(int64_t (*now_ms)(void *ud), void *ud) {
  virtual_clock = now_ms;
  virtual_clock_ud = ud;
}

int64_t util_now_ms(void) {
  if (virtual_clock) return virtual_clock(virtual_clock_ud);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void util_hex(const void *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  const unsigned char *b = bytes;
  for (size_t i = 0; i < n; i++) out[2 * i] = digits[b[i] >> 4], out[2 * i + 1] = digits[b[i] & 15];
  out[2 * n] = 0;
}

static int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int util_unhex(const char *hex, void *bytes, size_t n) {
  unsigned char *b = bytes;
  if (!hex || strlen(hex) != 2 * n) return -1;
  for (size_t i = 0; i < n; i++) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    b[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}

void util_sha256_hex(const void *buf, size_t len, char out[65]) {
  unsigned char md[32];
  unsigned int mdlen = 0;
  EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL);
  util_hex(md, sizeof md, out);
}

int util_file_sha256_hex(const char *path, char out[65]) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha256(), NULL);
  unsigned char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) EVP_DigestUpdate(md, buf, n);
  int bad = ferror(f);
  fclose(f);
  unsigned char d[32];
  unsigned int dn = 0;
  EVP_DigestFinal_ex(md, d, &dn);
  EVP_MD_CTX_free(md);
  if (bad) return errno = EIO, -1;
  util_hex(d, sizeof d, out);
  return 0;
}

/* ---- memory ---- */

/* Says what failed on stderr and in the crash note, then aborts. Formats on
 * the stack and writes with write(2): nothing here may need the heap. */
__attribute__((noreturn)) static void out_of_memory(size_t count, size_t size) {
  char what[96];
  if (count == 1) snprintf(what, sizeof what, "out of memory (%zu bytes)", size);
  else snprintf(what, sizeof what, "out of memory (%zu x %zu bytes)", count, size);
  char line[128];
  int n = snprintf(line, sizeof line, "engine: %s\n", what);
  if (n > 0) {
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w; /* a stderr that cannot be written to leaves the note and the abort */
  }
  fatal_reason(what);
  abort();
}

void *util_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) out_of_memory(1, n);
  return p;
}

void *util_xcalloc(size_t count, size_t size) {
  void *p = count && size ? calloc(count, size) : calloc(1, 1);
  if (!p) out_of_memory(count, size);
  return p;
}

void *util_xrealloc(void *p, size_t n) {
  void *np = realloc(p, n ? n : 1);
  if (!np) out_of_memory(1, n);
  return np;
}

/* Failure is reported (ENOMEM), not fatal: callers already answer a file
 * that cannot be read. */
char *util_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    errno = ENOMEM;
    return NULL;
  }
  for (;;) {
    if (n + 1 >= cap) {
      cap *= 2;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        errno = ENOMEM;
        return NULL;
      }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    errno = EIO;
    return NULL;
  }
  buf[n] = 0;
  if (len) *len = n;
  return buf;
}

char *util_strdup(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = util_xmalloc(n);
  memcpy(d, s, n);
  return d;
}

char *util_vfmt(const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  /* vsnprintf fails only for a result past INT_MAX bytes: no caller makes one */
  if (n < 0) {
    va_end(again);
    out_of_memory(1, (size_t)INT_MAX + 1);
  }
  char *out = util_xmalloc((size_t)n + 1);
  vsnprintf(out, (size_t)n + 1, fmt, again);
  va_end(again);
  return out;
}

char *util_fmt(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *out = util_vfmt(fmt, ap);
  va_end(ap);
  return out;
}

void util_seterr(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

uint64_t util_random64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) != sizeof v) v = (uint64_t)util_now_ms() * 0x9E3779B97F4A7C15ull ^ (uint64_t)clock();
  return v;
}

/* ---- UTF-8 ---- */

size_t util_utf8_decode(const char *s, size_t n, uint32_t *cp, size_t *bad) {
  const unsigned char *u = (const unsigned char *)s;
  unsigned char c = u[0];
  *bad = 1;
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint32_t v;
  unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte (RFC 3629 table) */
  if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, v = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;      /* overlong */
    else if (c == 0xED) hi = 0x9F; /* surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, v = c & 0x07;
    if (c == 0xF0) lo = 0x90;      /* overlong */
    else if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
  } else
    return 0; /* a continuation byte, C0/C1 (overlong) or F5-FF */
  for (size_t i = 1; i < len; i++) {
    if (i >= n || u[i] < (i == 1 ? lo : 0x80) || u[i] > (i == 1 ? hi : 0xBF)) {
      *bad = i;
      return 0;
    }
    v = (v << 6) | (u[i] & 0x3F);
  }
  *cp = v;
  return len;
}

char *util_utf8_repair(const char *s, size_t n, size_t *outn) {
  size_t i = 0, bad, len;
  uint32_t cp;
  while (i < n) {
    if ((unsigned char)s[i] < 0x80) { /* the common case, without a call per byte */
      i++;
      continue;
    }
    if (!(len = util_utf8_decode(s + i, n - i, &cp, &bad))) break;
    i += len;
  }
  if (i >= n) return NULL;
  ubuf b = {0};
  ubuf_add(&b, s, i);
  for (; i < n; i += len ? len : bad) {
    len = util_utf8_decode(s + i, n - i, &cp, &bad);
    if (len) ubuf_add(&b, s + i, len);
    else ubuf_add(&b, "\xEF\xBF\xBD", 3);
  }
  *outn = b.n;
  ubuf_add(&b, "", 1);
  return b.p;
}

int util_unsafe_codepoint(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

int util_text_problem(const char *s, size_t n, int lines, char *why, size_t whylen) {
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t bad, len = util_utf8_decode(s + i, n - i, &cp, &bad);
    if (!len) {
      util_seterr(why, whylen, "byte %zu is not UTF-8", i + 1);
      return -1;
    }
    if (util_unsafe_codepoint(cp) && !(lines && (cp == '\n' || cp == '\t'))) {
      util_seterr(why, whylen, "a control character at byte %zu", i + 1);
      return -1;
    }
    i += len;
  }
  return 0;
}

/* ---- ubuf ---- */

/* The capacity for n more bytes (doubling from 4096), or 0 when that
 * overflows size_t. */
static size_t grown_cap(const ubuf *b, size_t n) {
  if (n > SIZE_MAX - b->n) return 0;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->n + n) {
    if (cap > SIZE_MAX / 2) return b->n + n;
    cap *= 2;
  }
  return cap;
}

int ubuf_try_add(ubuf *b, const void *data, size_t n) {
  if (b->n + n > b->cap || n > SIZE_MAX - b->n) {
    size_t cap = grown_cap(b, n);
    char *np = cap ? realloc(b->p, cap) : NULL;
    if (!np) return -1;
    b->p = np;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, data, n);
  b->n += n;
  return 0;
}

int ubuf_add(ubuf *b, const void *data, size_t n) {
  if (ubuf_try_add(b, data, n) != 0) out_of_memory(1, b->n > SIZE_MAX - n ? SIZE_MAX : b->n + n);
  return 0;
}

void ubuf_free(ubuf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

void capped_add(capped_output *c, int which, const char *data, size_t n) {
  c->total += n;
  if (which != 1 && which != 2) return;
  size_t room = c->stored < c->max ? c->max - c->stored : 0;
  if (n > room) {
    c->truncated = 1;
    n = room;
  }
  /* output that does not fit in memory is dropped like output past the cap */
  if (!n) return;
  if (ubuf_try_add(which == 1 ? &c->out : &c->err, data, n) == 0) c->stored += n;
  else c->truncated = 1;
}

void capped_free(capped_output *c) {
  ubuf_free(&c->out);
  ubuf_free(&c->err);
}

/* ---- strmap ---- */
char strmap_tomb_[1];

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

void strmap_init(strmap *m) { memset(m, 0, sizeof *m); }

void strmap_free(strmap *m) {
  for (size_t i = 0; i < m->cap; i++)
    if (STRMAP_LIVE(m, i)) free(m->keys[i]);
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

static size_t find_slot(const strmap *m, const char *key) {
  size_t mask = m->cap - 1, i = hash_str(key) & mask;
  while (m->keys[i]) {
    if (m->keys[i] != STRMAP_TOMB && strcmp(m->keys[i], key) == 0) return i;
    i = (i + 1) & mask;
  }
  return SIZE_MAX;
}

void *strmap_get(const strmap *m, const char *key) {
  if (!m->cap) return NULL;
  size_t i = find_slot(m, key);
  return i == SIZE_MAX ? NULL : m->vals[i];
}

static void grow(strmap *m) {
  strmap old = *m;
  m->cap = !old.cap ? 16 : (old.len * 2 >= old.cap ? old.cap * 2 : old.cap);
  m->keys = util_xcalloc(m->cap, sizeof(char *));
  m->vals = util_xcalloc(m->cap, sizeof(void *));
  m->len = 0;
  for (size_t i = 0; i < old.cap; i++) {
    if (!STRMAP_LIVE(&old, i)) continue;
    size_t mask = m->cap - 1, j = hash_str(old.keys[i]) & mask;
    while (m->keys[j]) j = (j + 1) & mask;
    m->keys[j] = old.keys[i];
    m->vals[j] = old.vals[i];
    m->len++;
  }
  m->used = m->len;
  free(old.keys);
  free(old.vals);
}

void strmap_put(strmap *m, const char *key, void *val) {
  if (m->cap) {
    size_t i = find_slot(m, key);
    if (i != SIZE_MAX) {
      m->vals[i] = val;
      return;
    }
  }
  if (!m->cap || (m->used + 1) * 4 >= m->cap * 3) grow(m);
  size_t mask = m->cap - 1, i = hash_str(key) & mask;
  while (STRMAP_LIVE(m, i)) i = (i + 1) & mask;
  if (!m->keys[i]) m->used++;
  m->keys[i] = util_strdup(key);
  m->vals[i] = val;
  m->len++;
}

void *strmap_del(strmap *m, const char *key) {
  if (!m->cap) return NULL;
  size_t i = find_slot(m, key);
  if (i == SIZE_MAX) return NULL;
  void *v = m->vals[i];
  free(m->keys[i]);
  m->keys[i] = STRMAP_TOMB;
  m->vals[i] = NULL;
  m->len--;
  return v;
}

void strmap_clear(strmap *m, void (*free_val)(void *)) {
  for (size_t i = 0; i < m->cap; i++)
    if (STRMAP_LIVE(m, i)) free_val(m->vals[i]);
  strmap_free(m);
  strmap_init(m);
}

int util_check_seconds(double v, const char *what, char *err, size_t errlen) {
  if (v >= 0 && v <= UTIL_MAX_SECONDS) return 0; /* false for NaN too */
  char shown[32];
  if (v != v) snprintf(shown, sizeof shown, "nan"); /* without a sign: -nan says nothing more */
  else snprintf(shown, sizeof shown, "%.15g", v);    /* "inf", "-1", "1e+300" */
  util_seterr(err, errlen, "%s must be a finite number of seconds from 0 to %.0f (100 years), not %s", what,
              UTIL_MAX_SECONDS, shown);
  return -1;
}

int util_read_fd(int fd, size_t max, ubuf *b) {
  char chunk[65536];
  ssize_t n;
  while ((n = read(fd, chunk, sizeof chunk)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (ubuf_try_add(b, chunk, (size_t)n) != 0) return ENOMEM; /* reported: the caller names the file */
    if (max && b->n > max) return EFBIG; /* a pipe: stop reading at the limit */
  }
  return 0;
}

const char *util_file_kind(unsigned mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISSOCK(mode) ? "a socket"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISCHR(mode)  ? "a device"
                          : "not a regular file";
}
