/* session_view_transcript: events for a terminal (`engine events` on one,
 * a foreground start): each laid out to the terminal's width, a body taller
 * than the screen folded, approvals marked, and each kind of event drawn as
 * web/event_kinds.json (which the web page reads too) describes it. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "json.h"
#include "pretty.h"
#include "render.h"
#include "session_view_internal.h"
#include "util.h"

/* web/event_kinds.json, built in (CMakeLists.txt): how each kind is shown */
extern const unsigned char event_kinds_json[];
extern const unsigned long event_kinds_json_len;

/* ---------------------------------------------------------- terminals --- */

int view_cp_width(uint32_t cp) {
  static const uint32_t zero[][2] = {{0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x0610, 0x061A},
                                     {0x064B, 0x065F}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x200B, 0x200D},
                                     {0x20D0, 0x20FF}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xE0100, 0xE01EF}};
  static const uint32_t wide[][2] = {{0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},
                                     {0x23E9, 0x23EC},   {0x2614, 0x2615},   {0x2648, 0x2653},
                                     {0x26A1, 0x26A1},   {0x26AA, 0x26AB},   {0x26BD, 0x26BE},
                                     {0x2705, 0x2705},   {0x270A, 0x270B},   {0x274C, 0x274C},
                                     {0x2753, 0x2755},   {0x2795, 0x2797},   {0x2B1B, 0x2B1C},
                                     {0x2E80, 0x303E},   {0x3041, 0x33FF},   {0x3400, 0x4DBF},
                                     {0x4E00, 0x9FFF},   {0xA000, 0xA4CF},   {0xAC00, 0xD7A3},
                                     {0xF900, 0xFAFF},   {0xFE30, 0xFE4F},   {0xFF00, 0xFF60},
                                     {0xFFE0, 0xFFE6},   {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF},
                                     {0x1F900, 0x1F9FF}, {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD}};
  for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
    if (cp >= zero[i][0] && cp <= zero[i][1]) return 0;
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
    if (cp >= wide[i][0] && cp <= wide[i][1]) return 2;
  return 1;
}

/* The rows being laid out by view_wrap. */
typedef struct wrap {
  ubuf *out;
  int width, indent, col, row_start;
  size_t max_rows, rows, shown;
  int stopped; /* max_rows appended: the rest is only counted */
  int soft;    /* the row began by a wrap: spaces at its start are dropped */
  int owed;    /* spaces (the indentation, a gap between words) written with what comes next on the row */
} wrap;

static void wrap_put(wrap *w, const char *s, size_t n, int cols) {
  if (!w->stopped && w->out) {
    for (int i = 0; i < w->owed; i++) ubuf_add(w->out, " ", 1);
    ubuf_add(w->out, s, n);
  }
  w->owed = 0;
  w->col += cols;
}

/* Ends the row; the next begins with the bytes of text from pos. */
static void wrap_row(wrap *w, size_t pos, int soft) {
  if (!w->stopped && w->out) ubuf_add(w->out, "\n", 1);
  if (w->max_rows && w->rows == w->max_rows && !w->stopped) {
    w->stopped = 1;
    w->shown = pos;
  }
  w->rows++;
  w->col = w->row_start = w->owed = w->indent;
  w->soft = soft;
}

/* The next character of s[i..n) as shown: its bytes (s itself or an escape
 * in tmp), their length in *len, the input bytes in *adv; returns its columns. */
static int shown_char(const char *s, size_t n, size_t i, char tmp[16], const char **piece, size_t *len, size_t *adv) {
  uint32_t cp;
  size_t bad, k = util_utf8_decode(s + i, n - i, &cp, &bad);
  if (k && !util_unsafe_codepoint(cp)) {
    *piece = s + i;
    *len = *adv = k;
    return view_cp_width(cp);
  }
  *adv = k ? k : 1;
  render_buf(tmp, 16, s + i, *adv, 0); /* an escape: as many columns as bytes */
  *piece = tmp;
  *len = strlen(tmp);
  return (int)*len;
}

size_t view_wrap(ubuf *out, const char *s, size_t n, int width, int first_col, int indent, size_t max_rows,
                 size_t *shown) {
  size_t total = n;
  while (n && s[n - 1] == '\n') n--;
  if (width > 0 && indent > width / 2) indent = 0;
  wrap w = {out, width, indent, first_col, first_col, max_rows, 1, 0, 0, 0, 0};
  if (width > 0 && first_col >= width) wrap_row(&w, 0, 1);
  char tmp[16];
  const char *piece;
  size_t len, adv;
  for (size_t i = 0; i < n;) {
    char c = s[i];
    if (c == '\n') {
      wrap_row(&w, i + 1, 0);
      i++;
      continue;
    }
    if (c == ' ' || c == '\t') {
      int cols = c == ' ' ? 1 : 8 - (w.col - w.row_start) % 8;
      if (w.soft && w.col == w.row_start) {
        /* a space where a row was wrapped is the break itself */
      } else if (width > 0 && w.col + cols > width) {
        wrap_row(&w, i + 1, 1);
      } else {
        w.owed += cols; /* none at the end of a row */
        w.col += cols;
      }
      i++;
      continue;
    }
    /* a word: onto the next row when it does not fit here but would there */
    size_t j = i;
    int word = 0;
    while (j < n && s[j] != ' ' && s[j] != '\t' && s[j] != '\n') {
      word += shown_char(s, n, j, tmp, &piece, &len, &adv);
      j += adv;
    }
    if (width > 0 && w.col + word > width && w.col > w.row_start && w.indent + word <= width) wrap_row(&w, i, 1);
    while (i < j) {
      int cols = shown_char(s, n, i, tmp, &piece, &len, &adv);
      if (width > 0 && w.col + cols > width && w.col > w.row_start) wrap_row(&w, i, 1);
      wrap_put(&w, piece, len, cols);
      w.soft = 0;
      i += adv;
    }
  }
  if (!w.stopped) {
    if (out) ubuf_add(out, "\n", 1);
    w.shown = total;
  }
  if (shown) *shown = w.shown;
  return w.rows;
}

/* Appends field k of the table at t as it was recorded (strings as they are,
 * the rest as JSON); returns 0 when it is absent (nothing appended). */
static int add_raw(ubuf *b, lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  const char *s = NULL;
  size_t n = 0;
  if (lua_type(L, -1) == LUA_TSTRING) s = lua_tolstring(L, -1, &n);
  else if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TLIGHTUSERDATA) s = json_encode(L, -1, &n);
  if (s) ubuf_add(b, s, n);
  lua_settop(L, t);
  return s != NULL;
}

static void add_str(ubuf *b, const char *s) { ubuf_add(b, s, strlen(s)); }

/* "\nLABEL: value" when the field is there. */
static void add_row_field(ubuf *b, lua_State *L, int t, const char *label, const char *k) {
  lua_getfield(L, t, k);
  int there = !lua_isnil(L, -1) && lua_type(L, -1) != LUA_TLIGHTUSERDATA;
  lua_settop(L, t);
  if (!there) return;
  add_str(b, "\n");
  add_str(b, label);
  add_str(b, ": ");
  add_raw(b, L, t, k);
}

static int field_is_true(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  int yes = lua_toboolean(L, -1) && lua_type(L, -1) == LUA_TBOOLEAN;
  lua_settop(L, t);
  return yes;
}

/* Whether field k is there (JSON null is not). */
static int present(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  int yes = !lua_isnil(L, -1) && lua_type(L, -1) != LUA_TLIGHTUSERDATA;
  lua_settop(L, t);
  return yes;
}

static int field_is(lua_State *L, int t, const char *k, int type) {
  lua_getfield(L, t, k);
  int yes = lua_type(L, -1) == type;
  lua_settop(L, t);
  return yes;
}

/* ------------------------------------------------------ event kinds --- */

/* How a kind of event is shown comes from web/event_kinds.json, which the
 * page reads too: one description, so that the terminal and the page show
 * the same thing (see its "about"). Here each of its shapes is drawn as
 * transcript text; view_wrap then wraps and escapes it like any other. */

/* Pushes section[name] of the kinds (decoded once, kept in the registry);
 * 0 with nothing pushed when there is none. */
static int kind_push(lua_State *L, const char *section, const char *name) {
  int top = lua_gettop(L);
  if (lua_getfield(L, LUA_REGISTRYINDEX, "engine.event_kinds") != LUA_TTABLE) {
    lua_pop(L, 1);
    char err[64];
    if (json_decode_safe(L, (const char *)event_kinds_json, event_kinds_json_len, err, sizeof err) != 0) return 0;
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "engine.event_kinds");
  }
  if (lua_getfield(L, -1, section) != LUA_TTABLE || (name && lua_getfield(L, -1, name) != LUA_TTABLE)) {
    lua_settop(L, top);
    return 0;
  }
  lua_replace(L, top + 1);
  lua_settop(L, top + 1);
  return 1;
}

/* The string field k of the description at d, or NULL (valid while d is). */
static const char *kind_str(lua_State *L, int d, const char *k) {
  lua_getfield(L, d, k);
  const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  lua_pop(L, 1); /* the string stays in the description */
  return s;
}

/* Pushes the value at the dotted path of the table at t ("result.verdict");
 * 0 with nothing pushed when it is missing (or null). */
static int path_push(lua_State *L, int t, const char *path) {
  lua_pushvalue(L, t);
  for (const char *p = path; *p;) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (!lua_istable(L, -1)) break;
    lua_pushlstring(L, p, n);
    lua_gettable(L, -2);
    lua_remove(L, -2);
    p += n + (dot ? 1 : 0);
    if (!dot) break;
  }
  if (lua_isnil(L, -1) || lua_type(L, -1) == LUA_TLIGHTUSERDATA) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

/* Appends the text of the value at the top (a string as it is, else its
 * JSON), at most max characters (0: all), and pops it. */
static void add_top(ubuf *b, lua_State *L, size_t max) {
  size_t n = 0;
  const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : json_encode(L, -1, &n);
  size_t k = 0, chars = 0;
  while (k < n && (!max || chars < max)) { /* whole UTF-8 characters */
    k++;
    while (k < n && ((unsigned char)s[k] & 0xc0) == 0x80) k++;
    chars++;
  }
  ubuf_add(b, s, k);
  lua_pop(L, 1);
}

/* A line template: {field} or {field:N} is the field of the table at t, and
 * [...] is left out when a field inside it is missing. Returns 0 when a
 * field outside brackets is missing (the text is then incomplete). */
static int add_template(ubuf *b, lua_State *L, int t, const char *tpl) {
  int complete = 1;
  size_t opt_at = 0;
  int in_opt = 0, opt_ok = 1;
  for (const char *p = tpl; *p; p++) {
    if (*p == '[' && !in_opt) {
      in_opt = 1, opt_ok = 1, opt_at = b->n;
    } else if (*p == ']' && in_opt) {
      if (!opt_ok) b->n = opt_at;
      in_opt = 0;
    } else if (*p == '{' && strchr(p, '}')) {
      const char *close = strchr(p, '}'), *colon = memchr(p, ':', (size_t)(close - p));
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)((colon ? colon : close) - p - 1), p + 1);
      if (path_push(L, t, name))
        add_top(b, L, colon ? (size_t)strtoul(colon + 1, NULL, 10) : 0);
      else if (in_opt)
        opt_ok = 0;
      else
        complete = 0;
      p = close;
    } else {
      ubuf_add(b, p, 1);
    }
  }
  return complete;
}

/* Where a kind is drawn: b, the event's text (wrapped and escaped by
 * view_wrap); block, rows laid out already (a review's table), shown under
 * the event, indented by BLOCK_INDENT, in block_width columns. */
typedef struct kind_out {
  ubuf *b, *block;
  size_t block_width;
  int color;
} kind_out;
enum { BLOCK_INDENT = 4 };

/* The review shape: summary, verdict and findings as the outcome shows them,
 * in rows of the block. */
static void add_review(kind_out *ko, lua_State *L, int t, int d) {
  static const char *const parts[] = {"summary", "verdict", "findings"};
  lua_createtable(L, 0, 3);
  int o = lua_gettop(L);
  for (size_t i = 0; i < 3; i++) {
    const char *path = kind_str(L, d, parts[i]);
    if (path && path_push(L, t, path)) lua_setfield(L, o, parts[i]);
  }
  size_t n;
  const char *json = json_encode(L, o, &n);
  pretty_opts po = pretty_defaults(ko->block_width, ko->color);
  char *text = pretty_review(json, n, &po);
  for (const char *line = text; *line;) { /* each row indented */
    const char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    ubuf_add(ko->block, "        ", BLOCK_INDENT);
    ubuf_add(ko->block, line, len);
    ubuf_add(ko->block, "\n", 1);
    line += len + (nl ? 1 : 0);
  }
  free(text);
  lua_settop(L, o - 1);
}

/* The count of findings and the verdict: a review in one line (an approval
 * of a call shown above). */
static void add_review_digest(ubuf *b, lua_State *L, int t, int d) {
  const char *fp = kind_str(L, d, "findings"), *vp = kind_str(L, d, "verdict");
  size_t n = 0;
  if (fp && path_push(L, t, fp)) {
    if (lua_istable(L, -1)) n = lua_rawlen(L, -1);
    lua_pop(L, 1);
  }
  char num[64];
  snprintf(num, sizeof num, "a review with %zu finding%s", n, n == 1 ? "" : "s");
  add_str(b, num);
  if (vp && path_push(L, t, vp)) {
    add_str(b, ", verdict ");
    add_top(b, L, 80);
  }
}

/* The table at t shown by the description at d (its shape). digest: a
 * review in one line. Returns 0 when d has no shape this draws. */
static int add_kind(kind_out *ko, lua_State *L, int t, int d, int digest) {
  ubuf *b = ko->b;
  const char *shape = kind_str(L, d, "shape");
  if (!shape) return 0;
  if (strcmp(shape, "command") == 0) {
    const char *f = kind_str(L, d, "command");
    if (!f || !path_push(L, t, f)) return 0;
    add_str(b, "$ ");
    add_top(b, L, 0);
  } else if (strcmp(shape, "line") == 0) {
    const char *tpl = kind_str(L, d, "line");
    size_t at = b->n;
    if (!tpl || !add_template(b, L, t, tpl)) {
      b->n = at;
      return 0;
    }
  } else if (strcmp(shape, "file") == 0) {
    const char *pf = kind_str(L, d, "path"), *cf = kind_str(L, d, "content");
    if (!pf || !cf || !path_push(L, t, pf)) return 0;
    add_top(b, L, 0);
    size_t n = 0, lines = 0;
    const char *c = path_push(L, t, cf) && lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
    for (size_t i = 0; c && i < n; i++) lines += c[i] == '\n' || i == n - 1;
    char head[96];
    snprintf(head, sizeof head, " (%zu bytes, %zu line%s)", n, lines, lines == 1 ? "" : "s");
    add_str(b, head);
    lua_getfield(L, d, "lines");
    size_t want = lua_isinteger(L, -1) ? (size_t)lua_tointeger(L, -1) : 4, shown = 0, i = 0;
    lua_pop(L, 1);
    size_t seen = 0; /* lines passed, blank ones among them (not shown) */
    while (c && i < n && shown < want && !digest) {
      const char *nl = memchr(c + i, '\n', n - i);
      size_t e = nl ? (size_t)(nl - c) : n;
      if (e > i) { /* cut to a row (at a character's start): a glimpse, not the file */
        size_t room = ko->block_width > 60 ? ko->block_width - 30 : 30, k = i, cols = 0;
        while (k < e && cols < room) {
          k++;
          while (k < e && ((unsigned char)c[k] & 0xc0) == 0x80) k++;
          cols++;
        }
        add_str(b, "\n  ");
        ubuf_add(b, c + i, k - i);
        if (k < e) add_str(b, "...");
        shown++;
      }
      i = e + 1;
      seen++;
    }
    if (c && shown && lines > seen) {
      snprintf(head, sizeof head, "\n  ... %zu more line%s", lines - seen, lines - seen == 1 ? "" : "s");
      add_str(b, head);
    }
    if (c) lua_pop(L, 1);
  } else if (strcmp(shape, "review") == 0) {
    static const char *const parts[] = {"summary", "verdict", "findings"};
    int any = 0; /* none of them: not a review after all */
    for (size_t i = 0; i < 3 && !any; i++) {
      const char *path = kind_str(L, d, parts[i]);
      if (path && path_push(L, t, path)) any = 1, lua_pop(L, 1);
    }
    if (!any) return 0;
    if (digest || !ko->block) add_review_digest(b, L, t, d);
    else add_review(ko, L, t, d);
  } else {
    return 0;
  }
  return 1;
}

/* A tool call's arguments (field "args" of the payload at t) as the tool's
 * kind shows them, else as their JSON. */
static void add_args(kind_out *ko, lua_State *L, int t, int digest) {
  ubuf *b = ko->b;
  int top = lua_gettop(L);
  lua_getfield(L, t, "tool");
  const char *tool = lua_tostring(L, -1);
  int a = lua_gettop(L) + 1;
  lua_getfield(L, t, "args");
  size_t at = b->n;
  int shown = tool && lua_istable(L, a) && kind_push(L, "tools", tool) && add_kind(ko, L, a, lua_gettop(L), digest);
  if (!shown) {
    b->n = at;
    lua_settop(L, a);
    if (!lua_isnil(L, a)) add_top(b, L, 0);
  }
  lua_settop(L, top);
}

/* The model's final answer, when it is a result (a JSON object with one of
 * the fields the "result" kind names): that result's shape. */
static int add_result(kind_out *ko, lua_State *L, int t) {
  int top = lua_gettop(L);
  lua_getfield(L, t, "text");
  size_t n;
  const char *text = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
  char err[8];
  int shown = 0;
  if (text && n && text[0] == '{' && json_decode_safe(L, text, n, err, sizeof err) == 0 && lua_istable(L, -1)) {
    int r = lua_gettop(L);
    if (kind_push(L, "result", NULL)) {
      size_t at = ko->b->n;
      add_str(ko->b, "the final answer:");
      shown = add_kind(ko, L, r, lua_gettop(L), 0);
      if (!shown) ko->b->n = at;
    }
  }
  lua_settop(L, top);
  return shown;
}

/* The body of an event in the words of view_event_line, nothing cut; an
 * approval's mark in *mark (with its colour in *sgr), the columns its later
 * rows hang under its start in *hang. */
static void transcript_body(lua_State *L, const domain_event *e, kind_out *ko, const char **mark,
                            const char **sgr, int *hang) {
  ubuf *b = ko->b;
  static const char YELLOW[] = "\033[1;33m", GREEN[] = "\033[1;32m", RED[] = "\033[1;31m";
  const char *ty = e->type;
  int t = 1;
  char probe[400];
  if (view_decode_payload(L, e->payload) != 0 || !lua_istable(L, 1)) {
    ty = "";
  } else {
    static const char *const main_field[][2] = {
        {"tool.requested", "tool"},        {"tool.result", "tool"},          {"session.status", "status"},
        {"limit.exceeded", "limit"},       {"artifact.saved", "path"},       {"session.created", "objective"},
        {"session.completed", "outcome"}, {"signal.sent", "by"},            {"cancel.requested", "by"},
        {"sandbox.reprovisioned", "host"}};
    for (size_t i = 0; i < sizeof main_field / sizeof main_field[0]; i++)
      if (strcmp(ty, main_field[i][0]) == 0 && !*view_field(L, t, main_field[i][1], probe, sizeof probe)) {
        ty = "";
        break;
      }
  }
  *mark = *sgr = NULL;
  *hang = 0;
  if (strcmp(ty, "agent.message") == 0) {
    add_str(b, "assistant: ");
    size_t before = b->n;
    if (!add_result(ko, L, t)) add_raw(b, L, t, "text");
    if (b->n == before) add_str(b, "(tool calls only)");
    *hang = 11;
  } else if (strcmp(ty, "tool.requested") == 0) {
    add_str(b, "  -> ");
    add_raw(b, L, t, "tool");
    add_str(b, " ");
    add_args(ko, L, t, 0);
    *hang = 5;
  } else if (strcmp(ty, "tool.result") == 0) {
    add_str(b, "  <- ");
    add_raw(b, L, t, "tool");
    if (field_is_true(L, t, "denied")) add_str(b, " (denied)");
    else if (field_is(L, t, "ok", LUA_TBOOLEAN) && !field_is_true(L, t, "ok")) add_str(b, " (failed)");
    add_str(b, ": ");
    add_raw(b, L, t, "content");
    *hang = 5;
  } else if (strcmp(ty, "approval.requested") == 0) {
    *mark = "?? APPROVAL NEEDED";
    *sgr = YELLOW;
    if (present(L, t, "request_id")) {
      add_str(b, " ");
      if (!add_raw(b, L, t, "tool") && !add_raw(b, L, t, "kind")) add_str(b, "(no tool)");
      add_str(b, " (request ");
      add_raw(b, L, t, "request_id");
      add_str(b, ")");
      add_row_field(b, L, t, "reason", "reason");
      if (present(L, t, "args")) { /* shown whole with the call above: what it is, in a line */
        add_str(b, "\nargs: ");
        add_args(ko, L, t, 1);
      }
      add_row_field(b, L, t, "update", "update");
    } else if (*e->payload) {
      add_str(b, " ");
      add_str(b, e->payload);
    }
    *hang = 3;
  } else if (strcmp(ty, "approval.decided") == 0 || strcmp(ty, "approval.overruled") == 0) {
    int overruled = ty[9] == 'o', approved = !overruled && field_is_true(L, t, "approved");
    *mark = overruled ? "!! OVERRULED" : approved ? "ok APPROVED" : "!! DENIED";
    *sgr = approved ? GREEN : RED;
    if (present(L, t, "approver")) {
      add_str(b, overruled ? " by the policies after an approval by " : " by ");
      add_raw(b, L, t, "approver");
    }
    if (present(L, t, "request_id")) {
      add_str(b, " (request ");
      add_raw(b, L, t, "request_id");
      add_str(b, ")");
    }
    add_row_field(b, L, t, "reason", "reason");
    if (!b->n && *e->payload && strcmp(e->payload, "null") != 0) {
      add_str(b, " ");
      add_str(b, e->payload);
    }
    *hang = 3;
  } else if (strcmp(ty, "signal.sent") == 0) {
    add_str(b, "signal '");
    add_raw(b, L, t, "name");
    add_str(b, "' sent by ");
    add_raw(b, L, t, "by");
  } else if (strcmp(ty, "cancel.requested") == 0) {
    add_str(b, "cancellation requested by ");
    add_raw(b, L, t, "by");
  } else if (strcmp(ty, "session.status") == 0) {
    add_str(b, "[");
    add_raw(b, L, t, "status");
    add_str(b, "]");
  } else if (strcmp(ty, "limit.exceeded") == 0) {
    add_str(b, "!! limit ");
    add_raw(b, L, t, "limit");
    add_str(b, " reached (");
    add_raw(b, L, t, "value");
    add_str(b, " of ");
    add_raw(b, L, t, "max");
    add_str(b, ")");
  } else if (strcmp(ty, "sandbox.reprovisioned") == 0) {
    add_str(b, "!! sandbox provisioned again on ");
    add_raw(b, L, t, "host");
    add_str(b, " (");
    add_raw(b, L, t, "reason");
    add_str(b, ")");
  } else if (strcmp(ty, "artifact.saved") == 0) {
    add_str(b, "  saved ");
    add_raw(b, L, t, "path");
    add_str(b, " (");
    add_raw(b, L, t, "size");
    add_str(b, " bytes)");
  } else if (strcmp(ty, "session.created") == 0) {
    add_str(b, "session: ");
    add_raw(b, L, t, "objective");
    *hang = 9;
  } else if (strcmp(ty, "session.completed") == 0) {
    add_str(b, "completed (");
    add_raw(b, L, t, "outcome");
    add_str(b, "): ");
    add_raw(b, L, t, "summary");
  } else if (strcmp(ty, "session.failed") == 0) {
    add_str(b, "failed: ");
    add_raw(b, L, t, "error");
    add_raw(b, L, t, "problems");
  } else if (*ty && kind_push(L, "events", ty) && add_kind(ko, L, t, lua_gettop(L), 0)) {
    *hang = 2;
  } else {
    char *s = util_fmt("%-22s %s", e->type, e->payload ? e->payload : "");
    add_str(b, s);
    free(s);
    *hang = 23;
  }
  lua_settop(L, 0);
}

char *view_event_transcript(const domain_event *e, const view_layout *lay) {
  lua_State *L = view_fmt_state();
  if (!L) return util_fmt("#%-4lld (out of memory)\n", (long long)e->seq);
  char t[40];
  view_time(e->time, t, sizeof t);
  ubuf body = {0}, block = {0}, out = {0};
  const char *mark, *sgr;
  int hang;
  kind_out ko = {&body, &block, lay->width > BLOCK_INDENT + 40 ? (size_t)(lay->width - BLOCK_INDENT) : 100, lay->color};
  transcript_body(L, e, &ko, &mark, &sgr, &hang);
  char *head = util_fmt("#%-4lld %s  ", (long long)e->seq, t + 11);
  int headw = (int)strlen(head), markw = mark ? (int)strlen(mark) : 0, width = lay->width;
  int indent = headw + hang;
  if (width > 0 && indent > width / 2) indent = headw <= width / 2 ? headw : 2;
  size_t shown, rows = view_wrap(NULL, body.p, body.n, width, headw + markw, indent, 0, &shown), keep = 0;
  if (!lay->full && lay->height > 0 && rows > (size_t)lay->height) keep = lay->height / 2 > 3 ? lay->height / 2 : 3;
  add_str(&out, head);
  if (mark) {
    if (lay->color) add_str(&out, sgr);
    add_str(&out, mark);
    if (lay->color) add_str(&out, "\033[0m");
  }
  view_wrap(&out, body.p, body.n, width, headw + markw, indent, keep, &shown);
  if (keep && shown < body.n) {
    char *more = util_fmt("[... %zu bytes more%s%s]", body.n - shown, lay->more ? ": " : "", lay->more ? lay->more : "");
    for (int i = 0; i < indent; i++) ubuf_add(&out, " ", 1);
    view_wrap(&out, more, strlen(more), width, indent, indent, 0, NULL);
    free(more);
  }
  if (block.n) ubuf_add(&out, block.p, block.n); /* rendered already (pretty.h) */
  ubuf_add(&out, "", 1);
  free(head);
  ubuf_free(&body);
  ubuf_free(&block);
  return out.p;
}

int view_terminal_size(int fd, int *cols, int *rows) {
  struct winsize ws;
  int tty = isatty(fd);
  *cols = 80;
  *rows = 24;
  if (tty && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    *cols = ws.ws_col;
    if (ws.ws_row > 0) *rows = ws.ws_row;
    return tty;
  }
  const char *c = getenv("COLUMNS"), *l = getenv("LINES");
  long v;
  if (c && (v = strtol(c, NULL, 10)) > 0 && v < 10000) *cols = (int)v;
  if (l && (v = strtol(l, NULL, 10)) > 0 && v < 10000) *rows = (int)v;
  return tty;
}
