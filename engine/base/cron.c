/* cron: parsing cron expressions and finding their next fire time (cron.h).
 *
 * Time zones come from the TZif files of the system's tzdata
 * (/usr/share/zoneinfo, RFC 8536): the 64-bit section's transitions, and its
 * footer's POSIX TZ rule for times after the last one. Nothing here touches
 * the process's TZ or calls tzset, so the event loop may call it anywhere. */
#include "cron.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "util.h"

#define ZONEINFO_DIR "/usr/share/zoneinfo"
#define TZIF_MAX_BYTES (1 << 20)

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ------------------------------------------------------------- calendar --- */

static int64_t floordiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = floordiv(y, 400);
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
  z += 719468;
  int64_t era = floordiv(z, 146097);
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

static int is_leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m) {
  static const int n[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : n[m - 1];
}

/* 0 = Sunday. */
static int weekday(int64_t days) {
  return (int)(((days % 7) + 11) % 7);
}

/* -------------------------------------------------------------- parsing --- */

enum { F_SEC, F_MIN, F_HOUR, F_DOM, F_MON, F_DOW, F_COUNT };

static const char *const MONTH_NAMES[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                          "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
static const char *const DAY_NAMES[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

static const struct {
  const char *name;
  int min, max;
  const char *const *names; /* names[i] is the value min + i */
  int nnames;
} FIELDS[F_COUNT] = {
    {"second", 0, 59, NULL, 0},       {"minute", 0, 59, NULL, 0},        {"hour", 0, 23, NULL, 0},
    {"day-of-month", 1, 31, NULL, 0}, {"month", 1, 12, MONTH_NAMES, 12}, {"day-of-week", 0, 7, DAY_NAMES, 7},
};

static const struct {
  const char *name, *expr;
} MACROS[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},  {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"},
};

/* One value of field f: a number or (month, day-of-week) a name. */
static int parse_value(int f, const char *s, size_t n, int *out, char *err, size_t errlen) {
  int name_field = FIELDS[f].names != NULL;
  if (n == 0) {
    seterr(err, errlen, "%s: missing value", FIELDS[f].name);
    return -1;
  }
  if (isdigit((unsigned char)s[0])) {
    long v = 0;
    for (size_t i = 0; i < n; i++) {
      if (!isdigit((unsigned char)s[i])) {
        seterr(err, errlen, "%s: '%.*s' is not a number", FIELDS[f].name, (int)(n > 32 ? 32 : n), s);
        return -1;
      }
      if (v < 100000) v = v * 10 + (s[i] - '0');
    }
    if (v < FIELDS[f].min || v > FIELDS[f].max) {
      seterr(err, errlen, "%s: %.*s is out of range %d-%d", FIELDS[f].name, (int)(n > 32 ? 32 : n), s, FIELDS[f].min,
             FIELDS[f].max);
      return -1;
    }
    *out = (int)v;
    return 0;
  }
  if (name_field && isalpha((unsigned char)s[0])) {
    for (int i = 0; i < FIELDS[f].nnames; i++)
      if (n == 3 && strncasecmp(s, FIELDS[f].names[i], 3) == 0) {
        *out = FIELDS[f].min + i;
        return 0;
      }
    seterr(err, errlen, "%s: unknown name '%.*s'", FIELDS[f].name, (int)(n > 32 ? 32 : n), s);
    return -1;
  }
  seterr(err, errlen, "%s: '%.*s' is not a number", FIELDS[f].name, (int)(n > 32 ? 32 : n), s);
  return -1;
}

/* One comma-separated item of field f into *bits. */
static int parse_item(int f, const char *s, size_t n, uint64_t *bits, char *err, size_t errlen) {
  const char *fname = FIELDS[f].name;
  int lo = FIELDS[f].min, hi = FIELDS[f].max, step = 1;
  if (n == 0) {
    seterr(err, errlen, "%s: empty item in list", fname);
    return -1;
  }
  const char *slash = memchr(s, '/', n);
  size_t base_n = slash ? (size_t)(slash - s) : n;
  if (slash) {
    const char *st = slash + 1;
    size_t sn = n - base_n - 1;
    if (memchr(st, '/', sn)) {
      seterr(err, errlen, "%s: '%.*s' has more than one '/'", fname, (int)(n > 32 ? 32 : n), s);
      return -1;
    }
    int smax = f == F_DOW ? 7 : FIELDS[f].max;
    long v = 0;
    for (size_t i = 0; i < sn; i++) {
      if (!isdigit((unsigned char)st[i])) {
        seterr(err, errlen, "%s: step '%.*s' is not a number", fname, (int)(sn > 32 ? 32 : sn), st);
        return -1;
      }
      if (v < 100000) v = v * 10 + (st[i] - '0');
    }
    if (sn == 0) {
      seterr(err, errlen, "%s: missing step after '/'", fname);
      return -1;
    }
    if (v < 1 || v > smax) {
      seterr(err, errlen, "%s: step %.*s is out of range 1-%d", fname, (int)(sn > 32 ? 32 : sn), st, smax);
      return -1;
    }
    step = (int)v;
  }
  if (base_n == 1 && (s[0] == '*' || s[0] == '?')) {
    if (s[0] == '?' && f != F_DOM && f != F_DOW) {
      seterr(err, errlen, "%s: '?' is only allowed in day-of-month and day-of-week", fname);
      return -1;
    }
    if (f == F_DOW) hi = 6; /* 7 is Sunday again */
  } else {
    const char *dash = memchr(s, '-', base_n);
    size_t an = dash ? (size_t)(dash - s) : base_n;
    if (parse_value(f, s, an, &lo, err, errlen) != 0) return -1;
    if (dash) {
      if (parse_value(f, dash + 1, base_n - an - 1, &hi, err, errlen) != 0) return -1;
      if (lo > hi) {
        seterr(err, errlen, "%s: range %.*s goes backwards", fname, (int)(base_n > 32 ? 32 : base_n), s);
        return -1;
      }
    } else if (!slash) {
      hi = lo; /* a single value; "A/S" runs from A to the maximum */
    }
  }
  for (int v = lo; v <= hi; v += step) *bits |= (uint64_t)1 << (f == F_DOW && v == 7 ? 0 : v);
  return 0;
}

static int parse_field(int f, const char *s, size_t n, uint64_t *bits, char *err, size_t errlen) {
  *bits = 0;
  size_t start = 0;
  for (size_t i = 0; i <= n; i++)
    if (i == n || s[i] == ',') {
      if (parse_item(f, s + start, i - start, bits, err, errlen) != 0) return -1;
      start = i + 1;
    }
  return 0;
}

int cron_parse(const char *s, cron_expr *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!s) s = "";
  size_t len = strlen(s);
  if (len > CRON_EXPR_MAX) {
    seterr(err, errlen, "expression is longer than %d bytes", CRON_EXPR_MAX);
    return -1;
  }
  while (len && isspace((unsigned char)s[len - 1])) len--;
  while (len && isspace((unsigned char)*s)) s++, len--;
  if (len == 0) {
    seterr(err, errlen, "empty expression");
    return -1;
  }
  if (s[0] == '@') {
    for (size_t i = 0; i < sizeof MACROS / sizeof *MACROS; i++)
      if (strlen(MACROS[i].name) == len && strncasecmp(s, MACROS[i].name, len) == 0)
        return cron_parse(MACROS[i].expr, out, err, errlen);
    seterr(err, errlen,
           "unknown macro '%.*s' (expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)",
           (int)(len > 32 ? 32 : len), s);
    return -1;
  }
  const char *tok[F_COUNT];
  size_t tokn[F_COUNT];
  int count = 0;
  for (size_t i = 0; i < len;) {
    if (isspace((unsigned char)s[i])) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < len && !isspace((unsigned char)s[j])) j++;
    if (count < F_COUNT) tok[count] = s + i, tokn[count] = j - i;
    count++;
    i = j;
  }
  if (count != 5 && count != 6) {
    seterr(err, errlen, "expected 5 or 6 fields, got %d", count);
    return -1;
  }
  int first = count == 6 ? F_SEC : F_MIN;
  uint64_t bits[F_COUNT] = {1}; /* five fields: second 0 */
  for (int f = first; f < F_COUNT; f++)
    if (parse_field(f, tok[f - first], tokn[f - first], &bits[f], err, errlen) != 0) return -1;
  out->second = bits[F_SEC];
  out->minute = bits[F_MIN];
  out->hour = (uint32_t)bits[F_HOUR];
  out->dom = (uint32_t)bits[F_DOM];
  out->month = (uint16_t)bits[F_MON];
  out->dow = (uint8_t)bits[F_DOW];
  const char *dom = tok[F_DOM - first], *dow = tok[F_DOW - first];
  out->dom_star = dom[0] == '*' || dom[0] == '?';
  out->dow_star = dow[0] == '*' || dow[0] == '?';
  out->wildcard = tok[F_MIN - first][0] == '*' || tok[F_HOUR - first][0] == '*';
  return 0;
}

/* ----------------------------------------------------------- time zones --- */

/* A POSIX TZ rule date: Jn (1-365, no 29 February), n (0-365) or Mm.w.d. */
typedef struct tz_rule {
  char kind; /* 'J', 'N' or 'M' */
  int n, m, w, d;
  int32_t time; /* seconds after local midnight, may be negative or > 24 h */
} tz_rule;

typedef struct tz_info {
  int64_t *trans;     /* transition instants, ascending */
  int32_t *trans_off; /* UTC offset from each transition on */
  size_t n;
  int32_t off0;   /* before the first transition */
  int footer_dst; /* the footer has DST rules (otherwise the last offset stays) */
  int32_t std_off, dst_off;
  tz_rule start, end;
} tz_info;

/* Instants [start, end) share the offset off; prev_off is the one before start. */
typedef struct tz_seg {
  int64_t start, end;
  int32_t off, prev_off;
} tz_seg;

static void tz_free(tz_info *z) {
  free(z->trans);
  free(z->trans_off);
}

static const char *posix_name(const char *p) {
  if (*p == '<') {
    while (*p && *p != '>') p++;
    return *p ? p + 1 : NULL;
  }
  const char *b = p;
  while (isalpha((unsigned char)*p)) p++;
  return p - b >= 3 ? p : NULL;
}

/* [+-]hh[:mm[:ss]], hours up to 167; seconds into *out. */
static const char *posix_time(const char *p, int32_t *out) {
  int sign = 1;
  if (*p == '+' || *p == '-') sign = *p++ == '-' ? -1 : 1;
  int32_t v = 0, part = 0;
  for (int k = 0; k < 3; k++) {
    if (k && *p != ':') break;
    if (k) p++;
    if (!isdigit((unsigned char)*p)) return NULL;
    part = 0;
    while (isdigit((unsigned char)*p) && part < 1000) part = part * 10 + (*p++ - '0');
    if ((k == 0 && part > 167) || (k && part > 59)) return NULL;
    v += part * (k == 0 ? 3600 : k == 1 ? 60 : 1);
  }
  *out = sign * v;
  return p;
}

static const char *posix_rule(const char *p, tz_rule *r) {
  memset(r, 0, sizeof *r);
  r->time = 7200;
  if (*p == 'J' || isdigit((unsigned char)*p)) {
    r->kind = *p == 'J' ? 'J' : 'N';
    if (*p == 'J') p++;
    if (!isdigit((unsigned char)*p)) return NULL;
    while (isdigit((unsigned char)*p) && r->n < 1000) r->n = r->n * 10 + (*p++ - '0');
    if ((r->kind == 'J' && (r->n < 1 || r->n > 365)) || r->n > 365) return NULL;
  } else if (*p == 'M') {
    r->kind = 'M';
    if (sscanf(p, "M%d.%d.%d", &r->m, &r->w, &r->d) != 3) return NULL;
    if (r->m < 1 || r->m > 12 || r->w < 1 || r->w > 5 || r->d < 0 || r->d > 6) return NULL;
    p++;
    for (int dots = 0; *p && (isdigit((unsigned char)*p) || (*p == '.' && dots++ < 2)); p++) {
    }
  } else {
    return NULL;
  }
  if (*p == '/') p = posix_time(p + 1, &r->time);
  return p;
}

/* The footer "STDoff[DST[off][,start[/time],end[/time]]]"; 0 when understood. */
static int parse_footer(const char *p, tz_info *z) {
  int32_t std;
  if (!(p = posix_name(p)) || !(p = posix_time(p, &std))) return -1;
  z->std_off = -std; /* POSIX counts west of Greenwich as positive */
  if (!*p) return 0;
  if (!(p = posix_name(p))) return -1;
  z->dst_off = z->std_off + 3600;
  if (*p && *p != ',') {
    int32_t dst;
    if (!(p = posix_time(p, &dst))) return -1;
    z->dst_off = -dst;
  }
  if (*p++ != ',' || !(p = posix_rule(p, &z->start)) || *p++ != ',' || !(p = posix_rule(p, &z->end)) || *p) return -1;
  z->footer_dst = 1;
  return 0;
}

/* The local time (seconds since the epoch, as if UTC) at which rule r falls in year y. */
static int64_t rule_local(const tz_rule *r, int64_t y) {
  int64_t jan1 = days_from_civil(y, 1, 1), day;
  if (r->kind == 'J') {
    day = r->n - 1 + (is_leap(y) && r->n >= 60);
  } else if (r->kind == 'N') {
    day = r->n;
  } else {
    int64_t first = days_from_civil(y, r->m, 1);
    int64_t d = first + (r->d - weekday(first) + 7) % 7 + (int64_t)(r->w - 1) * 7;
    while (d - first >= days_in_month(y, r->m)) d -= 7;
    day = d - jan1;
  }
  return (jan1 + day) * 86400 + r->time;
}

static uint64_t be(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = v << 8 | p[i];
  return v;
}

/* Loads zone name into *z; -1 with err for an unknown or unreadable zone. */
static int tz_load(const char *name, tz_info *z, char *err, size_t errlen) {
  memset(z, 0, sizeof *z);
  if (!name || strcmp(name, "UTC") == 0) return 0;
  size_t nl = strlen(name);
  int ok = nl > 0 && nl < 256 && name[0] != '/' && !strstr(name, "..");
  for (size_t i = 0; ok && i < nl; i++) ok = isalnum((unsigned char)name[i]) || strchr("/_+-.", name[i]);
  if (!ok) {
    seterr(err, errlen, "invalid time zone name '%.64s'", name);
    return -1;
  }
  char path[512];
  snprintf(path, sizeof path, "%s/%s", ZONEINFO_DIR, name);
  struct stat sb;
  if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    seterr(err, errlen, "unknown time zone '%s' (no %s)", name, path);
    return -1;
  }
  size_t len = 0;
  unsigned char *b = NULL;
  if (sb.st_size > TZIF_MAX_BYTES || !(b = (unsigned char *)util_read_file(path, &len))) {
    seterr(err, errlen, "time zone '%s': cannot read %s: %s", name, path,
           sb.st_size > TZIF_MAX_BYTES ? "too large" : strerror(errno));
    return -1;
  }
  /* v1 header and data, then (version 2+) the 64-bit header, data and footer. */
  size_t at = 0;
  uint64_t cnt[6];
  int version = len >= 44 ? b[4] : 0;
  if (len < 44 || memcmp(b, "TZif", 4) != 0 || version < '2') goto bad;
  for (int i = 0; i < 6; i++) cnt[i] = be(b + 20 + 4 * i, 4);
  /* counts: isutcnt isstdcnt leapcnt timecnt typecnt charcnt */
  at = 44 + cnt[3] * 5 + cnt[4] * 6 + cnt[5] + cnt[2] * 8 + cnt[1] + cnt[0];
  if (at + 44 > len || memcmp(b + at, "TZif", 4) != 0) goto bad;
  for (int i = 0; i < 6; i++) cnt[i] = be(b + at + 20 + 4 * i, 4);
  at += 44;
  uint64_t timecnt = cnt[3], typecnt = cnt[4];
  if (typecnt == 0 || typecnt > 256 || timecnt > 100000) goto bad;
  if (cnt[2]) { /* "right/" zones count leap seconds: their instants are not Unix time */
    seterr(err, errlen, "time zone '%s': zones with leap seconds are not supported", name);
    free(b);
    return -1;
  }
  size_t data = timecnt * 9 + typecnt * 6 + cnt[5] + cnt[2] * 12 + cnt[1] + cnt[0];
  if (at + data > len) goto bad;
  const unsigned char *times = b + at, *idx = times + timecnt * 8, *types = idx + timecnt;
  z->n = timecnt;
  z->trans = util_xmalloc((timecnt + 1) * sizeof *z->trans);
  z->trans_off = util_xmalloc((timecnt + 1) * sizeof *z->trans_off);
  for (uint64_t i = 0; i < timecnt; i++) {
    if (idx[i] >= typecnt) goto bad;
    z->trans[i] = (int64_t)be(times + 8 * i, 8);
    z->trans_off[i] = (int32_t)be(types + 6 * idx[i], 4);
    if (i && z->trans[i] <= z->trans[i - 1]) goto bad;
  }
  z->off0 = (int32_t)be(types, 4);
  /* The footer: "\n" TZ string "\n"; an empty one means no rule past the table. */
  at += data;
  if (at < len && b[at] == '\n') {
    const char *f = (const char *)b + at + 1;
    const char *nlp = memchr(f, '\n', len - at - 1);
    if (nlp && nlp > f) {
      char footer[128];
      size_t fl = (size_t)(nlp - f);
      if (fl >= sizeof footer) goto bad;
      memcpy(footer, f, fl);
      footer[fl] = 0;
      if (parse_footer(footer, z) != 0) {
        seterr(err, errlen, "time zone '%s': unsupported rule '%s' in %s", name, footer, path);
        free(b);
        tz_free(z);
        return -1;
      }
    }
  }
  free(b);
  return 0;
bad:
  seterr(err, errlen, "time zone '%s': %s is not a valid TZif file (version 2 or later)", name, path);
  free(b);
  tz_free(z);
  memset(z, 0, sizeof *z);
  return -1;
}

/* The segment of constant offset that holds instant t. */
static void tz_seg_at(const tz_info *z, int64_t t, tz_seg *s) {
  size_t lo = 0, hi = z->n; /* i = the number of transitions <= t */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (z->trans[mid] <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  size_t i = lo;
  s->start = i ? z->trans[i - 1] : INT64_MIN;
  s->off = i ? z->trans_off[i - 1] : z->off0;
  s->prev_off = i >= 2 ? z->trans_off[i - 2] : z->off0;
  s->end = i < z->n ? z->trans[i] : INT64_MAX;
  if (i < z->n || !z->footer_dst) return;
  /* Past the table: the footer's rule for the years around t. */
  int64_t y, at[6];
  int m, d;
  int32_t after[6];
  civil_from_days(floordiv(t, 86400), &y, &m, &d);
  int k = 0;
  for (int64_t yy = y - 1; yy <= y + 1; yy++) {
    at[k] = rule_local(&z->start, yy) - z->std_off, after[k++] = z->dst_off;
    at[k] = rule_local(&z->end, yy) - z->dst_off, after[k++] = z->std_off;
  }
  for (int a = 1; a < 6; a++) /* insertion sort of six */
    for (int b2 = a; b2 > 0 && at[b2 - 1] > at[b2]; b2--) {
      int64_t ta = at[b2];
      at[b2] = at[b2 - 1], at[b2 - 1] = ta;
      int32_t oa = after[b2];
      after[b2] = after[b2 - 1], after[b2 - 1] = oa;
    }
  for (int j = 0; j < 6; j++) {
    if (at[j] <= t) {
      if (at[j] > s->start) {
        s->start = at[j];
        s->off = after[j];
        s->prev_off = after[j] == z->dst_off ? z->std_off : z->dst_off;
      }
    } else {
      s->end = at[j];
      break;
    }
  }
}

/* --------------------------------------------------------------- search --- */

static int day_matches(const cron_expr *c, int64_t days, int dom) {
  int dom_ok = (c->dom >> dom) & 1, dow_ok = (c->dow >> weekday(days)) & 1;
  if (c->dom_star || c->dow_star) return dom_ok && dow_ok;
  return dom_ok || dow_ok;
}

/* The first local time (seconds since the epoch as if UTC) in [lo, hi) that
 * matches c; 0 with *out, or -1 when there is none. */
static int find_local(const cron_expr *c, int64_t lo, int64_t hi, int64_t *out) {
  int64_t t = lo;
  while (t < hi) {
    int64_t days = floordiv(t, 86400), y;
    int64_t sod = t - days * 86400;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    int h = (int)(sod / 3600), mi = (int)(sod / 60 % 60), s = (int)(sod % 60);
    if (!((c->month >> m) & 1)) {
      t = days_from_civil(m == 12 ? y + 1 : y, m == 12 ? 1 : m + 1, 1) * 86400;
    } else if (!day_matches(c, days, d)) {
      t = (days + 1) * 86400;
    } else if (!((c->hour >> h) & 1)) {
      t = days * 86400 + (int64_t)(h + 1) * 3600;
    } else if (!((c->minute >> mi) & 1)) {
      t = days * 86400 + (int64_t)h * 3600 + (int64_t)(mi + 1) * 60;
    } else if (!((c->second >> s) & 1)) {
      t++;
    } else {
      *out = t;
      return 0;
    }
  }
  return -1;
}

int cron_next(const cron_expr *c, const char *tz, int64_t after_unix, int64_t *next_unix, char *err, size_t errlen) {
  /* Years 1 to 9999 keep every sum below far from overflowing. */
  if (after_unix < -62135596800LL || after_unix > 253402300799LL) {
    seterr(err, errlen, "time %lld is outside the years 1 to 9999", (long long)after_unix);
    return -1;
  }
  if (!c->second || !c->minute || !c->hour || !c->dom || !c->month || !c->dow) {
    seterr(err, errlen, "not a parsed cron expression");
    return -1;
  }
  tz_info z;
  if (tz_load(tz, &z, err, errlen) != 0) return -1;
  int64_t limit = after_unix + (int64_t)CRON_SEARCH_YEARS * 366 * 86400; /* instants <= limit */
  int64_t t = after_unix + 1;
  int rc = -1;
  while (t <= limit) {
    tz_seg s;
    tz_seg_at(&z, t, &s);
    int64_t end = s.end <= limit ? s.end : limit + 1;
    int64_t local;
    int began = s.start != INT64_MIN && s.start > after_unix;
    /* A fixed-time job whose local time fell into a spring-forward gap fires
     * once, at the gap's end. */
    if (began && !c->wildcard && s.off > s.prev_off &&
        find_local(c, s.start + s.prev_off, s.start + s.off, &local) == 0) {
      *next_unix = s.start;
      rc = 0;
      break;
    }
    /* After a fall-back the repeated local times already fired in the earlier
     * offset; a fixed-time job does not fire them again. */
    int64_t lo = t + s.off;
    if (!c->wildcard && s.start != INT64_MIN && s.prev_off > s.off && lo < s.start + s.prev_off)
      lo = s.start + s.prev_off;
    if (find_local(c, lo, end + s.off, &local) == 0) {
      *next_unix = local - s.off;
      rc = 0;
      break;
    }
    if (s.end > limit) break;
    t = s.end;
  }
  tz_free(&z);
  if (rc != 0) seterr(err, errlen, "never fires (no matching time within %d years)", CRON_SEARCH_YEARS);
  return rc;
}
