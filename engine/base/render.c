#include "render.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The output for the next piece of s[i..n): returns its length with *out
 * pointing into s (shown as it is) or into tmp (an escape); *adv gets the
 * input bytes it stands for. */
static size_t next_piece(const char *s, size_t n, size_t i, int flags, const char **out, char tmp[8], size_t *adv) {
  uint32_t cp;
  size_t bad, len = util_utf8_decode(s + i, n - i, &cp, &bad);
  *out = tmp;
  if (!len) { /* not UTF-8: each byte of the invalid part as itself in hex */
    *adv = 1;
    return (size_t)snprintf(tmp, 8, "\\x%02x", (unsigned char)s[i]);
  }
  *adv = len;
  if (!util_unsafe_codepoint(cp)) {
    *out = s + i;
    return len;
  }
  if (cp == '\n' || cp == '\t') {
    if (flags & RENDER_MULTILINE) {
      *out = s + i;
      return 1;
    }
    return (size_t)snprintf(tmp, 8, cp == '\n' ? "\\n" : "\\t");
  }
  if (cp == '\r') return (size_t)snprintf(tmp, 8, "\\r");
  if (cp < 0x80) return (size_t)snprintf(tmp, 8, "\\x%02x", (unsigned)cp);
  return (size_t)snprintf(tmp, 8, "\\u%04x", (unsigned)cp);
}

static size_t rendered_len(const char *s, size_t n, int flags) {
  size_t total = 0, adv;
  const char *out;
  char tmp[8];
  for (size_t i = 0; i < n; i += adv) total += next_piece(s, n, i, flags, &out, tmp, &adv);
  return total;
}

void render_add(ubuf *b, const char *s, size_t n, int flags, size_t max) {
  /* cut only when the whole would not fit, keeping room for the dots */
  size_t limit = max && rendered_len(s, n, flags) > max ? (max > 3 ? max - 3 : 0) : SIZE_MAX;
  size_t used = 0, adv;
  const char *out;
  char tmp[8];
  for (size_t i = 0; i < n; i += adv) {
    size_t k = next_piece(s, n, i, flags, &out, tmp, &adv);
    if (used + k > limit) {
      ubuf_add(b, "...", max > 3 ? 3 : max);
      return;
    }
    ubuf_add(b, out, k);
    used += k;
  }
}

const char *render_buf(char *out, size_t outlen, const char *s, size_t n, int flags) {
  if (!outlen) return out;
  ubuf b = {0};
  render_add(&b, s, n, flags, outlen - 1);
  if (b.n) memcpy(out, b.p, b.n);
  out[b.n] = 0;
  ubuf_free(&b);
  return out;
}

char *render_str(const char *s, int flags, size_t max) {
  ubuf b = {0};
  render_add(&b, s, strlen(s), flags, max);
  ubuf_add(&b, "", 1);
  return b.p;
}

void render_vline(FILE *f, size_t max, const char *fmt, va_list ap) {
  char *text = util_vfmt(fmt, ap);
  ubuf b = {0};
  render_add(&b, text, strlen(text), 0, max);
  ubuf_add(&b, "\n", 1);
  if (b.p) fwrite(b.p, 1, b.n, f);
  ubuf_free(&b);
  free(text);
}

void render_line(FILE *f, size_t max, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  render_vline(f, max, fmt, ap);
  va_end(ap);
}
