/* pretty: results laid out for people (pretty.h). */
#include "pretty.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "json.h"
#include "render.h"

/* ---------------------------------------------------- colour and width --- */

int pretty_color_parse(const char *s, pretty_color *out) {
  static const char *const names[] = {"auto", "always", "never"};
  for (int i = 0; i < 3; i++)
    if (strcmp(s, names[i]) == 0) {
      *out = (pretty_color)i;
      return 0;
    }
  return -1;
}

int pretty_color_on(pretty_color mode, int fd) {
  if (mode != PRETTY_COLOR_AUTO) return mode == PRETTY_COLOR_ALWAYS;
  const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
  if ((no && *no) || (term && strcmp(term, "dumb") == 0)) return 0;
  return isatty(fd);
}

size_t pretty_width(int fd) {
  struct winsize ws;
  size_t w = 80;
  const char *env = getenv("COLUMNS");
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    w = ws.ws_col;
  } else if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end == 0 && v > 0 && v < 100000) w = (size_t)v;
  }
  return w < 20 ? 20 : w;
}

pretty_opts pretty_defaults(size_t width, int color) {
  return (pretty_opts){.width = width, .color = color, .max_depth = 4, .max_items = 20, .max_string = 60};
}

/* ------------------------------------------------------------- printer --- */

/* The only SGR codes this module writes. */
enum sgr { SGR_RESET, SGR_BOLD, SGR_DIM, SGR_RED, SGR_GREEN, SGR_YELLOW, SGR_CYAN, SGR_NONE };
static const char *const SGR_CODE[] = {"0", "1", "2", "31", "32", "33", "36"};

/* A line being written (b) or only measured (b NULL: over is set once the
 * text passes the column limit). col counts code points: columns, near
 * enough for text that is not wide CJK. */
typedef struct pp {
  ubuf *b;
  size_t col, limit;
  int over;
  const pretty_opts *o;
} pp;

static size_t cols(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
  return c;
}

/* Length of the UTF-8 character at s (valid UTF-8: rendered text). */
static size_t char_len(const char *s, size_t n) {
  unsigned char c = (unsigned char)*s;
  size_t k = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
  return k < n ? k : n;
}

/* Text for the line, rendered first (render.h): data never reaches the
 * terminal as a control character, whatever path it took here. */
static void put(pp *p, const char *s, size_t n) {
  if (p->over || !n) return;
  ubuf r = {0};
  render_add(&r, s, n, 0, 0);
  p->col += cols(r.p, r.n);
  if (!p->b && p->col > p->limit)
    p->over = 1;
  else if (p->b)
    ubuf_add(p->b, r.p, r.n);
  ubuf_free(&r);
}

static void putz(pp *p, const char *s) {
  put(p, s, strlen(s));
}

static void sgr(pp *p, enum sgr c) {
  if (!p->b || !p->o->color || c == SGR_NONE) return;
  ubuf_add(p->b, "\x1b[", 2);
  ubuf_add(p->b, SGR_CODE[c], strlen(SGR_CODE[c]));
  ubuf_add(p->b, "m", 1);
}

/* s in colour c, then plain again. */
static void put_in(pp *p, enum sgr c, const char *s, size_t n) {
  sgr(p, c);
  put(p, s, n);
  if (c != SGR_NONE) sgr(p, SGR_RESET);
}

static void newline(pp *p, size_t indent) {
  if (p->b) {
    ubuf_add(p->b, "\n", 1);
    for (size_t i = 0; i < indent; i++) ubuf_add(p->b, " ", 1);
  }
  p->col = indent;
}

static void pad_to(pp *p, size_t col) {
  while (p->col < col) put(p, " ", 1);
}

/* ---------------------------------------------------------- JSON text --- */

static const char *skip_ws(const char *s, const char *end) {
  while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) s++;
  return s;
}

/* The members of an object or the elements of an array, in order. */
typedef struct iter {
  const char *s, *end;
  int object, first;
} iter;
typedef struct member {
  const char *key, *val; /* key: the string literal, NULL in an array */
  size_t kn, vn;
} member;

static iter iter_of(const char *v, size_t vn) {
  return (iter){v + 1, v + vn, *v == '{', 1};
}

static int iter_next(iter *it, member *m) {
  const char *s = skip_ws(it->s, it->end);
  if (s >= it->end || *s == (it->object ? '}' : ']')) return 0;
  if (!it->first) {
    if (*s != ',') return 0;
    s = skip_ws(s + 1, it->end);
  }
  it->first = 0;
  m->key = NULL;
  m->kn = 0;
  if (it->object) {
    const char *ke = *s == '"' ? json_skip(s, it->end) : NULL;
    if (!ke) return 0;
    m->key = s;
    m->kn = (size_t)(ke - s);
    s = skip_ws(ke, it->end);
    if (s >= it->end || *s != ':') return 0;
    s = skip_ws(s + 1, it->end);
  }
  const char *ve = json_skip(s, it->end);
  if (!ve) return 0;
  m->val = s;
  m->vn = (size_t)(ve - s);
  it->s = ve;
  return 1;
}

static size_t count_members(const char *v, size_t vn) {
  iter it = iter_of(v, vn);
  member m;
  size_t n = 0;
  while (iter_next(&it, &m)) n++;
  return n;
}

static int is_container(const char *v) {
  return *v == '{' || *v == '[';
}

static int key_is(const member *m, const char *key) {
  size_t k = strlen(key);
  return m->kn == k + 2 && memcmp(m->key + 1, key, k) == 0;
}

static unsigned hex4(const char *s) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return 0xfffd;
    v = v * 16 + (unsigned)d;
  }
  return v;
}

/* The unit of a string literal's text at s[i..n) that is never split: an
 * escape (a surrogate pair as one), or one UTF-8 character. Returns its
 * length, with *decoded the bytes it stands for in the decoded string. */
static size_t str_unit(const char *s, size_t n, size_t i, size_t *decoded) {
  if (s[i] == '\\' && i + 1 < n) {
    if (s[i + 1] != 'u' || i + 6 > n) {
      *decoded = 1;
      return 2;
    }
    unsigned cp = hex4(s + i + 2);
    if (cp >= 0xd800 && cp < 0xdc00 && i + 12 <= n && s[i + 6] == '\\' && s[i + 7] == 'u') {
      unsigned lo = hex4(s + i + 8);
      if (lo >= 0xdc00 && lo < 0xe000) {
        *decoded = 4;
        return 12;
      }
    }
    *decoded = cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3; /* a lone surrogate decodes to U+FFFD: 3 */
    return 6;
  }
  uint32_t cp;
  size_t bad, len = util_utf8_decode(s + i, n - i, &cp, &bad);
  *decoded = len ? len : 1;
  return len ? len : 1;
}

/* The string literal v[0..vn): whole when its text takes at most fit
 * columns, else its first cut columns, "...", and how many bytes of the
 * string were left out; whole too when that would not be shorter. */
static void put_string(pp *p, const char *v, size_t vn, size_t fit, size_t cut, enum sgr c) {
  const char *s = v + 1;
  size_t n = vn >= 2 ? vn - 2 : 0, i = 0, used = 0, left = 0, dec, all = cols(s, n);
  char note[64];
  if (all > fit) {
    while (i < n) {
      size_t k = str_unit(s, n, i, &dec), kc = cols(s + i, k);
      if (used + kc > cut) break;
      used += kc;
      i += k;
    }
    for (size_t j = i; j < n; left += dec) j += str_unit(s, n, j, &dec);
    snprintf(note, sizeof note, " (%zu more byte%s)", left, left == 1 ? "" : "s");
  }
  if (all <= fit || all <= used + 3 + strlen(note)) {
    put_in(p, c, v, vn);
    return;
  }
  sgr(p, c);
  put(p, v, i + 1);
  put(p, "...\"", 4);
  if (c != SGR_NONE) sgr(p, SGR_RESET);
  put_in(p, SGR_DIM, note, strlen(note));
}

static enum sgr scalar_color(const char *v) {
  return *v == '"' ? SGR_GREEN : SGR_YELLOW;
}

/* The value on the current line: ", " and ": " between members, strings cut
 * at max_string columns. */
static void compact(pp *p, const char *v, size_t vn) {
  size_t w = p->o->max_string;
  if (*v == '"') {
    put_string(p, v, vn, w, w, SGR_GREEN);
  } else if (is_container(v)) {
    int obj = *v == '{';
    put(p, obj ? "{" : "[", 1);
    iter it = iter_of(v, vn);
    member m;
    for (int first = 1; !p->over && iter_next(&it, &m); first = 0) {
      if (!first) put(p, ", ", 2);
      if (obj) {
        put_string(p, m.key, m.kn, w, w, SGR_CYAN);
        put(p, ": ", 2);
      }
      compact(p, m.val, m.vn);
    }
    put(p, obj ? "}" : "]", 1);
  } else {
    put_in(p, scalar_color(v), v, vn);
  }
}

/* Whether v fits on the current line with tail columns after it. */
static int fits(const pp *p, const char *v, size_t vn, size_t tail) {
  size_t w = p->o->width;
  pp m = {NULL, p->col, w > tail ? w - tail : 0, 0, p->o};
  compact(&m, v, vn);
  return !m.over;
}

/* The value v starting at the current column; a container that does not fit
 * has one member per line at indent + 2, its closing bracket at indent. tail:
 * the columns that follow it on its last line (a comma). */
static void layout(pp *p, const char *v, size_t vn, size_t indent, int level, size_t tail) {
  size_t w = p->o->width, room = w > p->col + tail ? w - p->col - tail : 0;
  if (*v == '"') { /* alone on its line: as much as the line holds */
    size_t fit = room > 2 ? room - 2 : 0;
    put_string(p, v, vn, fit, fit > 40 ? fit - 24 : 16, SGR_GREEN);
    return;
  }
  if (!is_container(v) || fits(p, v, vn, tail)) {
    compact(p, v, vn);
    return;
  }
  int obj = *v == '{';
  size_t total = count_members(v, vn), shown = 0;
  char note[96];
  if (level >= p->o->max_depth) {
    snprintf(note, sizeof note, "%s...%zu %s%s%s", obj ? "{" : "[", total, obj ? "key" : "item", total == 1 ? "" : "s",
             obj ? "}" : "]");
    put_in(p, SGR_DIM, note, strlen(note));
    return;
  }
  put(p, obj ? "{" : "[", 1);
  iter it = iter_of(v, vn);
  member m;
  while (shown < p->o->max_items && iter_next(&it, &m)) {
    int last = ++shown == total;
    newline(p, indent + 2);
    if (obj) {
      put_string(p, m.key, m.kn, p->o->max_string, p->o->max_string, SGR_CYAN);
      put(p, ": ", 2);
    }
    layout(p, m.val, m.vn, indent + 2, level + 1, last ? 0 : 1);
    if (!last) put(p, ",", 1);
  }
  if (shown < total) {
    newline(p, indent + 2);
    snprintf(note, sizeof note, "... %zu more %s%s", total - shown, obj ? "key" : "item",
             total - shown == 1 ? "" : "s");
    put_in(p, SGR_DIM, note, strlen(note));
  }
  newline(p, indent);
  put(p, obj ? "}" : "]", 1);
}

/* The one JSON value in strict[0..n) (json_for_output), or NULL. */
static const char *one_value(const char *strict, size_t n, size_t *vn) {
  const char *end = strict + n, *s = skip_ws(strict, end), *e = json_skip(s, end);
  if (!e || e == s || skip_ws(e, end) != end) return NULL;
  *vn = (size_t)(e - s);
  return s;
}

int pretty_json(ubuf *out, const char *json, size_t n, size_t col, const pretty_opts *o) {
  char *strict = json_for_output(json, n);
  size_t vn;
  const char *v = one_value(strict, strlen(strict), &vn);
  if (v) {
    pp p = {out, col, 0, 0, o};
    layout(&p, v, vn, col, 0, 0);
  }
  free(strict);
  return v ? 0 : -1;
}

/* ------------------------------------------------------------ outcome --- */

enum { LABEL_COL = 11, SUMMARY_LINES = 8, TITLE_LINES = 4, MAX_ROWS = 50, MAX_ARTIFACTS = 20 };

/* A decoded string rendered (render.h), its newlines kept when multiline
 * (tabs as a space). Malloc'd. */
static char *shown_text(const char *s, int multiline) {
  ubuf b = {0};
  render_add(&b, s, strlen(s), multiline ? RENDER_MULTILINE : 0, 0);
  ubuf_add(&b, "", 1);
  for (char *c = b.p; *c; c++)
    if (*c == '\t') *c = ' ';
  return b.p;
}

/* Rendered text t[0..n) (no control byte but \n) from the current column,
 * broken at spaces to fit width, each line after the first at indent; at most
 * max_lines lines (0: all). Returns how many bytes of t were left out. */
static size_t wrap(pp *p, const char *t, size_t n, size_t indent, size_t width, size_t max_lines, enum sgr c) {
  size_t i = 0, lines = 0;
  while (i < n) {
    if (max_lines && lines == max_lines) return n - i;
    if (lines++) newline(p, indent);
    size_t room = width > p->col + 10 ? width - p->col : 10, j = i, used = 0, brk = i;
    while (j < n && t[j] != '\n' && used < room) {
      if (t[j] == ' ') brk = j;
      j += char_len(t + j, n - j);
      used++;
    }
    size_t end = j, next = j;
    if (j < n && t[j] == '\n')
      next = j + 1;
    else if (j < n && t[j] == ' ')
      next = j + 1; /* the line ends at a space: it goes */
    else if (j < n && brk > i)
      end = brk, next = brk + 1;
    put_in(p, c, t + i, end - i);
    i = next;
  }
  return 0;
}

static void label(pp *p, const char *name) {
  if (p->col) newline(p, 0);
  putz(p, name);
  put(p, ":", 1);
  pad_to(p, LABEL_COL);
}

/* A decoded string member of the object v, rendered (malloc'd), or NULL. */
static char *text_member(const char *v, size_t vn, const char *key, int multiline) {
  char *s = json_get_string(v, vn, key), *out = s ? shown_text(s, multiline) : NULL;
  free(s);
  return out;
}

static int member_of(const char *v, size_t vn, const char *key, const char **m, size_t *mn) {
  return json_get(v, vn, key, m, mn) == 1 && !(*mn == 4 && memcmp(*m, "null", 4) == 0);
}

static enum sgr status_color(const char *s) {
  if (strcmp(s, "completed") == 0) return SGR_GREEN;
  if (strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0) return SGR_RED;
  return SGR_YELLOW;
}

static enum sgr severity_color(const char *s) {
  static const char *const red[] = {"blocker", "critical", "high", "error", NULL},
                           *const yellow[] = {"major", "medium", "warning", NULL}, *const dim[] = {"nit", "info", NULL};
  for (const char *const *k = red; *k; k++)
    if (strcmp(s, *k) == 0) return SGR_RED;
  for (const char *const *k = yellow; *k; k++)
    if (strcmp(s, *k) == 0) return SGR_YELLOW;
  for (const char *const *k = dim; *k; k++)
    if (strcmp(s, *k) == 0) return SGR_DIM;
  return SGR_NONE;
}

static enum sgr verdict_color(const char *s) {
  if (strcmp(s, "approve") == 0) return SGR_GREEN;
  if (strcmp(s, "request_changes") == 0) return SGR_RED;
  return SGR_YELLOW;
}

/* n with a comma every three digits. */
static void thousands(char *out, size_t len, int64_t n) {
  char d[32];
  unsigned long long u = n < 0 ? 0ull - (unsigned long long)n : (unsigned long long)n;
  int k = snprintf(d, sizeof d, "%llu", u), o = 0;
  if (n < 0 && len > 1) out[o++] = '-';
  for (int i = 0; i < k && (size_t)o + 2 < len; i++) {
    if (i && (k - i) % 3 == 0) out[o++] = ',';
    out[o++] = d[i];
  }
  out[o] = 0;
}

/* A folded JSON value under a label. */
static void json_lines(pp *p, const char *name, const char *v, size_t vn) {
  label(p, name);
  layout(p, v, vn, LABEL_COL, 0, 0);
}

/* The members of object v[0..vn) whose keys are not in skip, as an object's
 * text (malloc'd); NULL when there are none. */
static char *other_members(const char *v, size_t vn, const char *const *skip) {
  ubuf b = {0};
  iter it = iter_of(v, vn);
  member m;
  while (iter_next(&it, &m)) {
    int known = 0;
    for (const char *const *k = skip; *k && !known; k++) known = key_is(&m, *k);
    if (known) continue;
    ubuf_add(&b, b.n ? "," : "{", 1);
    ubuf_add(&b, m.key, m.kn);
    ubuf_add(&b, ":", 1);
    ubuf_add(&b, m.val, m.vn);
  }
  if (!b.n) return NULL;
  ubuf_add(&b, "}", 2); /* with the NUL */
  return b.p;
}

/* A finding's file:line (rendered), "-" without a file. Malloc'd. */
static char *finding_where(const char *f, size_t fn) {
  char *file = text_member(f, fn, "file", 0);
  int64_t line = json_get_int(f, fn, "line", 0);
  char *out = !file || !*file ? util_strdup("-")
              : line > 0      ? util_fmt("%s:%lld", file, (long long)line)
                              : util_strdup(file);
  free(file);
  return out;
}

/* The last max columns of rendered text s: "..." and its end when longer (a
 * path says most at its end). */
static void put_tail(pp *p, const char *s, size_t max) {
  size_t n = strlen(s), c = cols(s, n), i = 0;
  if (c <= max) {
    put(p, s, n);
    return;
  }
  for (size_t drop = c - (max > 3 ? max - 3 : 0); drop && i < n; drop--) i += char_len(s + i, n - i);
  put(p, "...", 3);
  put(p, s + i, n - i);
}

typedef struct finding_row {
  char *sev, *where, *title;
} finding_row;

static int collect_finding(void *ud, const char *f, size_t fn) {
  ubuf *rows = ud;
  finding_row r = {NULL, NULL, NULL};
  if (*f == '{') {
    r.sev = text_member(f, fn, "severity", 0);
    r.title = text_member(f, fn, "title", 0);
    r.where = finding_where(f, fn);
  } else {
    r.title = util_fmt("%.*s", (int)fn, f);
    r.where = util_strdup("-");
  }
  if (!r.sev) r.sev = util_strdup("-");
  if (!r.title) r.title = util_strdup("");
  ubuf_add(rows, &r, sizeof r);
  return 0;
}

/* "findings:  4 (1 blocker, 2 major)" and the table: severity, file:line,
 * title (wrapped in its column). */
static void findings_table(pp *p, const char *v, size_t vn) {
  ubuf rows = {0};
  json_each(v, vn, collect_finding, &rows);
  finding_row *r = (finding_row *)rows.p;
  size_t n = rows.n / sizeof *r, w = p->o->width;
  label(p, "findings");
  if (!n) {
    putz(p, "none");
    return;
  }
  /* the count, and per severity in the order they first appear */
  char buf[64];
  snprintf(buf, sizeof buf, "%zu", n);
  putz(p, buf);
  const char *kinds[8];
  size_t per[8], nk = 0, sevw = 8, wherew = 9, wmax = w * 2 / 5 > 20 ? w * 2 / 5 : 20;
  int many = 0; /* more kinds than the count line names */
  for (size_t i = 0; i < n; i++) {
    size_t k = 0;
    while (k < nk && strcmp(kinds[k], r[i].sev) != 0) k++;
    if (k == nk && nk < 8) kinds[nk] = r[i].sev, per[nk++] = 0;
    if (k < nk)
      per[k]++;
    else
      many = 1;
    size_t sc = cols(r[i].sev, strlen(r[i].sev)), wc = cols(r[i].where, strlen(r[i].where));
    if (sc > sevw) sevw = sc > 12 ? 12 : sc;
    if (wc > wherew) wherew = wc > wmax ? wmax : wc;
  }
  if (!many && (strcmp(kinds[0], "-") != 0 || nk > 1)) {
    putz(p, " (");
    for (size_t k = 0; k < nk; k++) {
      snprintf(buf, sizeof buf, "%s%zu ", k ? ", " : "", per[k]);
      putz(p, buf);
      put_in(p, severity_color(kinds[k]), kinds[k], strlen(kinds[k]));
    }
    putz(p, ")");
  }
  size_t tcol = 2 + sevw + 2 + wherew + 2, tw = w > tcol + 24 ? w : tcol + 24;
  newline(p, 2);
  sgr(p, SGR_BOLD);
  putz(p, "SEVERITY");
  pad_to(p, 2 + sevw + 2);
  putz(p, "FILE:LINE");
  pad_to(p, tcol);
  putz(p, "TITLE");
  sgr(p, SGR_RESET);
  for (size_t i = 0; i < n; i++) {
    if (i < MAX_ROWS) {
      newline(p, 2);
      sgr(p, severity_color(r[i].sev));
      put_tail(p, r[i].sev, sevw);
      sgr(p, SGR_RESET);
      pad_to(p, 2 + sevw + 2);
      put_tail(p, r[i].where, wherew);
      pad_to(p, tcol);
      size_t left = wrap(p, r[i].title, strlen(r[i].title), tcol, tw, TITLE_LINES, SGR_NONE);
      if (left) {
        snprintf(buf, sizeof buf, " ... (%zu more bytes)", left);
        put_in(p, SGR_DIM, buf, strlen(buf));
      }
    }
    free(r[i].sev);
    free(r[i].where);
    free(r[i].title);
  }
  if (n > MAX_ROWS) {
    newline(p, 2);
    snprintf(buf, sizeof buf, "... %zu more findings", n - MAX_ROWS);
    put_in(p, SGR_DIM, buf, strlen(buf));
  }
  ubuf_free(&rows);
}

/* An agent session's result: summary, verdict, usage, findings, and what
 * else its result holds (folded). The status line is open: its outcome and
 * a limit reached go on it. */
static void session_lines(pp *p, const char *res, size_t rn) {
  static const char *const known[] = {"summary",   "result",  "raw",   "turns",   "tool_calls", "tokens", "cost_usd",
                                      "artifacts", "outcome", "limit", "verdict", "findings",   NULL};
  static const char *const inner_known[] = {"verdict", "findings", NULL};
  const char *v, *inner = res;
  size_t vn, inn = rn;
  char *outcome = text_member(res, rn, "outcome", 0);
  if (outcome && strcmp(outcome, "completed") != 0) {
    putz(p, " (outcome: ");
    put_in(p, SGR_YELLOW, outcome, strlen(outcome));
    putz(p, ")");
  }
  free(outcome);
  if (member_of(res, rn, "limit", &v, &vn) && *v == '{') {
    char *what = text_member(v, vn, "limit", 0);
    char *line = util_fmt(" (limit %s reached: %lld of %lld)", what ? what : "?",
                          (long long)json_get_int(v, vn, "value", 0), (long long)json_get_int(v, vn, "max", 0));
    put_in(p, SGR_YELLOW, line, strlen(line));
    free(line);
    free(what);
  }
  if (member_of(res, rn, "summary", &v, &vn)) {
    label(p, "summary");
    char *s = *v == '"' ? text_member(res, rn, "summary", 1) : NULL;
    if (s) {
      size_t left = wrap(p, s, strlen(s), LABEL_COL, p->o->width, SUMMARY_LINES, SGR_NONE);
      if (left) {
        char note[64];
        snprintf(note, sizeof note, " ... (%zu more bytes)", left);
        put_in(p, SGR_DIM, note, strlen(note));
      }
    } else {
      layout(p, v, vn, LABEL_COL, 0, 0);
    }
    free(s);
  }
  if (member_of(res, rn, "result", &v, &vn) && *v == '{') inner = v, inn = vn;
  char *verdict = text_member(inner, inn, "verdict", 0);
  if (verdict) {
    label(p, "verdict");
    put_in(p, verdict_color(verdict), verdict, strlen(verdict));
    free(verdict);
  }
  /* usage: what the session spent */
  static const char *const usage[][3] = {
      {"turns", "model turn", "model turns"}, {"tool_calls", "tool call", "tool calls"}, {"tokens", "token", "tokens"}};
  int parts = 0;
  for (size_t i = 0; i < 3; i++) {
    int64_t k;
    if (!member_of(res, rn, usage[i][0], &v, &vn) || json_int(v, vn, &k) != 0) continue;
    char num[32];
    thousands(num, sizeof num, k);
    if (!parts++)
      label(p, "usage");
    else
      putz(p, ", ");
    putz(p, num);
    putz(p, " ");
    putz(p, usage[i][k == 1 ? 1 : 2]);
  }
  if (member_of(res, rn, "cost_usd", &v, &vn) && (*v == '-' || (*v >= '0' && *v <= '9'))) {
    char num[48];
    snprintf(num, sizeof num, "$%.4f", strtod(v, NULL));
    if (!parts++)
      label(p, "usage");
    else
      putz(p, ", ");
    putz(p, num);
  }
  if (json_get(inner, inn, "findings", &v, &vn) == 1 && *v == '[') findings_table(p, v, vn);
  /* what else the result holds */
  char *rest = NULL;
  if (inner != res)
    rest = other_members(inner, inn, inner_known);
  else if (member_of(res, rn, "result", &v, &vn))
    rest = util_fmt("%.*s", (int)vn, v);
  if (rest) json_lines(p, "result", rest, strlen(rest));
  char *other = other_members(res, rn, known); /* keys of a result of another shape ({summary, greetings}) */
  if (other) json_lines(p, rest ? "other" : "result", other, strlen(other));
  free(rest);
  free(other);
}

/* Whether a result is an agent session's (workflows/agent_session.lua). */
static int is_session_result(const char *v, size_t vn) {
  const char *m;
  size_t mn;
  return *v == '{' && (json_get(v, vn, "summary", &m, &mn) == 1 || json_get(v, vn, "turns", &m, &mn) == 1 ||
                       json_get(v, vn, "tool_calls", &m, &mn) == 1);
}

/* One artifact: its path in the session, size, and where it is stored. */
static void artifact_line(pp *p, const char *a, size_t an) {
  if (p->col > LABEL_COL) newline(p, LABEL_COL);
  char *path = *a == '{' ? text_member(a, an, "path", 0) : NULL,
       *stored = path ? text_member(a, an, "stored", 0) : NULL;
  if (!path) {
    compact(p, a, an);
  } else {
    char size[64] = "";
    const char *v;
    size_t vn;
    int64_t k;
    if (member_of(a, an, "size", &v, &vn) && json_int(v, vn, &k) == 0) {
      char num[32];
      thousands(num, sizeof num, k);
      snprintf(size, sizeof size, " (%s byte%s)", num, k == 1 ? "" : "s");
    }
    put_in(p, SGR_BOLD, path, strlen(path));
    putz(p, size);
    if (stored && *stored) { /* never cut: a path to open or copy; on a line of its own if need be */
      putz(p, " at");
      if (p->col + 1 + cols(stored, strlen(stored)) > p->o->width)
        newline(p, LABEL_COL + 2);
      else
        putz(p, " ");
      putz(p, stored);
    }
  }
  free(path);
  free(stored);
}

char *pretty_review(const char *json, size_t n, const pretty_opts *o) {
  char *strict = json_for_output(json, n);
  ubuf out = {0};
  pp p = {&out, 0, 0, 0, o};
  if (*strict == '{') session_lines(&p, strict, strlen(strict));
  ubuf_add(&out, "", 1);
  free(strict);
  return out.p;
}

char *pretty_outcome(const char *json, size_t n, const pretty_opts *o) {
  char *strict = json_for_output(json, n);
  size_t sn = strlen(strict), vn;
  char *id = *strict == '{' ? text_member(strict, sn, "id", 0) : NULL,
       *status = id ? text_member(strict, sn, "status", 0) : NULL;
  if (!id || !status) {
    free(strict);
    free(id);
    free(status);
    return NULL;
  }
  ubuf out = {0};
  pp p = {&out, 0, 0, 0, o};
  const char *v;
  label(&p, "id");
  putz(&p, id);
  label(&p, "status");
  put_in(&p, status_color(status), status, strlen(status));
  if (member_of(strict, sn, "result", &v, &vn)) {
    if (is_session_result(v, vn))
      session_lines(&p, v, vn);
    else
      json_lines(&p, "result", v, vn);
  } else if (strcmp(status, "completed") == 0) {
    label(&p, "result");
    put_in(&p, SGR_YELLOW, "null", 4);
  }
  if (member_of(strict, sn, "error", &v, &vn)) {
    char *s = *v == '"' ? text_member(strict, sn, "error", 1) : NULL;
    if (s) {
      label(&p, "error");
      wrap(&p, s, strlen(s), LABEL_COL, o->width, 0, SGR_RED);
    } else {
      json_lines(&p, "error", v, vn);
    }
    free(s);
  }
  if (member_of(strict, sn, "artifacts", &v, &vn) && *v == '[' && count_members(v, vn)) {
    size_t total = count_members(v, vn);
    label(&p, "artifacts");
    iter it = iter_of(v, vn);
    member m;
    for (size_t i = 0; i < MAX_ARTIFACTS && iter_next(&it, &m); i++) artifact_line(&p, m.val, m.vn);
    if (total > MAX_ARTIFACTS) {
      char note[64];
      snprintf(note, sizeof note, "... %zu more", total - MAX_ARTIFACTS);
      newline(&p, LABEL_COL);
      put_in(&p, SGR_DIM, note, strlen(note));
    }
  }
  newline(&p, 0);
  sgr(&p, SGR_DIM);
  putz(&p, "(all of it as JSON: engine show ");
  putz(&p, id);
  putz(&p, " --json)");
  sgr(&p, SGR_RESET);
  newline(&p, 0);
  ubuf_add(&out, "", 1);
  free(strict);
  free(id);
  free(status);
  return out.p;
}

/* -------------------------------------------------------------- table --- */

static enum sgr tone_color(pretty_tone t) {
  switch (t) {
  case PRETTY_GOOD: return SGR_GREEN;
  case PRETTY_WARN: return SGR_YELLOW;
  case PRETTY_BAD: return SGR_RED;
  case PRETTY_QUIET: return SGR_DIM;
  default: return SGR_NONE;
  }
}

char *pretty_table(const char *const *header, size_t ncols, const pretty_cell *cells, size_t nrows,
                   const pretty_opts *o) {
  ubuf out = {0};
  pp p = {&out, 0, 0, 0, o};
  if (!ncols) return ubuf_add(&out, "", 1), out.p;
  size_t n = ncols * nrows, *width = util_xcalloc(ncols, sizeof *width), max = o->width / 3 > 8 ? o->width / 3 : 8;
  char **shown = util_xcalloc(n ? n : 1, sizeof *shown);
  for (size_t c = 0; c < ncols; c++) width[c] = cols(header[c], strlen(header[c]));
  for (size_t i = 0; i < n; i++) {
    shown[i] = shown_text(cells[i].text ? cells[i].text : "", 0);
    size_t c = i % ncols, w = cols(shown[i], strlen(shown[i]));
    if (w > width[c]) width[c] = w;
  }
  size_t *at = util_xcalloc(ncols, sizeof *at); /* where each column starts */
  for (size_t c = 1; c < ncols; c++) at[c] = at[c - 1] + (width[c - 1] < max ? width[c - 1] : max) + 2;
  for (size_t r = 0; r <= nrows; r++) {
    if (r == 0) sgr(&p, SGR_BOLD);
    for (size_t c = 0; c < ncols; c++) {
      const char *t = r ? shown[(r - 1) * ncols + c] : header[c];
      enum sgr tone = r ? tone_color(cells[(r - 1) * ncols + c].tone) : SGR_NONE;
      if (c && *t) pad_to(&p, at[c]);
      if (c + 1 < ncols) {
        sgr(&p, tone);
        put_tail(&p, t, max);
        if (tone != SGR_NONE) sgr(&p, SGR_RESET);
      } else {
        wrap(&p, t, strlen(t), at[c], o->width > at[c] + 10 ? o->width : at[c] + 10, 0, tone);
      }
    }
    if (r == 0) sgr(&p, SGR_RESET);
    newline(&p, 0);
  }
  for (size_t i = 0; i < n; i++) free(shown[i]);
  free(shown);
  free(width);
  free(at);
  ubuf_add(&out, "", 1);
  return out.p;
}
