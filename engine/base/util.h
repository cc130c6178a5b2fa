/* util: small helpers shared by every module (time, hashing, files, a string map). */
#ifndef ENGINE_UTIL_H
#define ENGINE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>

/* Wall-clock milliseconds since the epoch (recorded in the log). */
int64_t util_now_ms(void);
/* Makes util_now_ms return now_ms(ud) instead of the wall clock, for this
 * process: `engine test`'s virtual clock, which skips timers. NULL restores
 * the wall clock. Monotonic time (util_mono_ms) is never virtual. */
void util_set_clock(int64_t (*now_ms)(void *ud), void *ud);
/* Monotonic milliseconds, for measuring durations only. */
int64_t util_mono_ms(void);

/* SHA-256 of buf as 64 lowercase hex chars plus NUL into out[65]. */
void util_sha256_hex(const void *buf, size_t len, char out[65]);
/* SHA-256 of the file at path, read in pieces, into out[65]: 0, or -1 with
 * errno (it cannot be opened, or a read failed: EIO). */
int util_file_sha256_hex(const char *path, char out[65]);
/* Lowercase hex of n bytes into out (2n + 1 bytes); and back: 0, or -1 when
 * hex is not exactly 2n hex digits. */
void util_hex(const void *bytes, size_t n, char *out);
int util_unhex(const char *hex, void *bytes, size_t n);

/* Reads a whole file; returns a malloc'd NUL-terminated buffer or NULL
 * (errno set: ENOMEM too, for a file bigger than memory). *len receives the
 * size without the NUL. */
char *util_read_file(const char *path, size_t *len);

/* ---- memory ----
 * The engine's allocations do not fail: when the C library has no memory,
 * these print "engine: out of memory (N bytes)" to stderr, name it as the
 * reason in the crash note (fatal.c) and abort(), a clean named crash instead
 * of a NULL dereference somewhere later. Code that can do something better
 * with a failure (a Lua allocator, a bounded read that reports ENOMEM, a
 * transfer that can be aborted) calls malloc itself and says so. A size of 0
 * is served as 1, so a result is never NULL. */
void *util_xmalloc(size_t n);
void *util_xcalloc(size_t count, size_t size);
void *util_xrealloc(void *p, size_t n);

/* A malloc'd copy of s (NULL only for NULL). */
char *util_strdup(const char *s);
/* printf into a malloc'd string (never NULL). */
char *util_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *util_vfmt(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Writes one formatted error message into err[errlen] (never overflows). */
void util_seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* 64 random bits from the OS. */
uint64_t util_random64(void);

/* Durations, in seconds: finite, >= 0 and at most UTIL_MAX_SECONDS (100 years
 * of 365.25 days), so seconds * 1000 always fits int64 milliseconds and a
 * timer. Returns 0, or -1 with err naming what and the value. */
#define UTIL_MAX_SECONDS 3155760000.0
int util_check_seconds(double v, const char *what, char *err, size_t errlen);

/* ---- UTF-8 ---- */
/* The UTF-8 sequence at s[0..n), n > 0: returns its length (1-4) and its code
 * point in *cp; or 0 when s does not start a valid sequence (overlong forms,
 * surrogates, code points past U+10FFFF, stray or missing continuation bytes),
 * with *bad set to the length of the invalid part (its maximal subpart, as
 * Unicode counts them: one U+FFFD stands for those bytes). */
size_t util_utf8_decode(const char *s, size_t n, uint32_t *cp, size_t *bad);
/* s[0..n) with each invalid part (as util_utf8_decode counts them) replaced
 * by U+FFFD: malloc'd and NUL-terminated, its length in *outn; NULL when
 * s is UTF-8 already (nothing to copy). */
char *util_utf8_repair(const char *s, size_t n, size_t *outn);
/* Code points a terminal acts on or that reorder what is read: C0 controls,
 * DEL, C1 controls (U+0080-U+009F) and the Unicode bidi controls (U+061C,
 * U+200E, U+200F, U+202A-U+202E, U+2066-U+2069). */
int util_unsafe_codepoint(uint32_t cp);
/* Whether s[0..n) is text fit for a name or a record (UTF-8 without unsafe
 * code points; lines: \n and \t allowed too): 0, or -1 with why naming the
 * first problem ("byte 3 is not UTF-8", "a control character at byte 7"). */
int util_text_problem(const char *s, size_t n, int lines, char *why, size_t whylen);

/* ---- ubuf: a growable byte buffer ---- */

typedef struct ubuf {
  char *p;
  size_t n, cap;
} ubuf;
/* Appends n bytes; aborts when out of memory (util_xrealloc), so it always
 * returns 0 (an int, for callers written when it could fail). */
int ubuf_add(ubuf *b, const void *data, size_t n);
/* The same for a caller with a better answer to a full memory (a transfer to
 * abort, an error to report): returns 0, or -1 with the buffer unchanged. */
int ubuf_try_add(ubuf *b, const void *data, size_t n);
void ubuf_free(ubuf *b);
/* Reads fd to its end, appending to *b, never more than max bytes (0: no
 * limit); returns 0, or an errno value (EFBIG past max, ENOMEM). */
int util_read_fd(int fd, size_t max, ubuf *b);
/* What a file that is not a regular one is, for errors: "a directory", ... */
const char *util_file_kind(unsigned mode);

/* Output of a command (stdout, stderr) kept up to a shared cap; what is past
 * the cap is counted and dropped, so a flood costs at most max bytes (what
 * does not fit in memory is dropped too, and marked truncated). */
typedef struct capped_output {
  ubuf out, err;
  size_t max, stored, total;
  int truncated;
} capped_output;
/* which: 1 stdout, 2 stderr (anything else is counted, not kept). */
void capped_add(capped_output *c, int which, const char *data, size_t n);
void capped_free(capped_output *c);

/* ---- strmap: open-addressing map from C string to pointer ---- */
typedef struct strmap {
  char **keys;
  void **vals;
  size_t cap, len, used; /* used = live + tombstones */
} strmap;

void strmap_init(strmap *m);
void strmap_free(strmap *m); /* frees keys, not values */
void *strmap_get(const strmap *m, const char *key);
void strmap_put(strmap *m, const char *key, void *val); /* copies key */
void *strmap_del(strmap *m, const char *key);          /* returns old value */
/* Empties m, freeing each value with free_val (and the tombstones with it). */
void strmap_clear(strmap *m, void (*free_val)(void *));
/* Iteration: for (size_t i = 0; i < m->cap; i++) if (m->keys[i] && m->keys[i] != STRMAP_TOMB) */
extern char strmap_tomb_[1];
#define STRMAP_TOMB strmap_tomb_
#define STRMAP_LIVE(m, i) ((m)->keys[i] && (m)->keys[i] != STRMAP_TOMB)

#endif
