#!/usr/bin/env python3
"""Merge logs from many files into one UTC timeline, or summarize them.

Reads files and directories (recursively; .gz too) and recognizes the common
timestamp formats: ISO 8601 / RFC 3339 (also with a space or '/' separators),
JSON log lines (@timestamp, time, ts, ... including epoch numbers), logfmt,
nginx/Apache access logs, syslog ("May  1 14:02:11", no year), klog/glog
("E0501 14:02:11.123456", no year) and leading epoch seconds or milliseconds.
Lines without a timestamp (stack traces, wrapped messages) are attached to
the entry before them. Timestamps without a zone are read in --tz (default
UTC) and flagged as assumed.

  log_timeline.py [PATH ...] --summary               what is there: per-file ranges, levels,
                                                     error histogram, most frequent errors
  log_timeline.py [PATH ...] --level warn --since 2024-05-01T14:00 --until 14:30
  log_timeline.py [PATH ...] --grep 'timeout|refused' -i --json

PATH defaults to /workspace/input. Python 3 standard library only; read-only.
"""
import argparse
import collections
import datetime as dt
import gzip
import json
import os
import re
import signal
import sys

UTC = dt.timezone.utc
MONTHS = {m: i for i, m in enumerate(["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                       "nov", "dec"], 1)}
LEVELS = {"trace": 0, "debug": 1, "info": 2, "notice": 2, "warn": 3, "error": 4, "fatal": 5}
LEVEL_ALIASES = {
    "trace": "trace", "debug": "debug", "dbg": "debug", "d": "debug", "info": "info", "information": "info",
    "informational": "info", "i": "info", "notice": "notice", "warn": "warn", "warning": "warn", "w": "warn",
    "error": "error", "err": "error", "e": "error", "severe": "error", "fatal": "fatal", "critical": "fatal",
    "crit": "fatal", "panic": "fatal", "emerg": "fatal", "emergency": "fatal", "alert": "fatal", "f": "fatal",
}

ISO_RE = re.compile(r"(\d{4})[-/](\d{2})[-/](\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
                    r"\s?(Z|[+-]\d{2}:?\d{2}|UTC|GMT)?")
CLF_RE = re.compile(r"\[(\d{2})/([A-Za-z]{3})/(\d{4}):(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))? ([+-]\d{4})\]")
SYSLOG_RE = re.compile(r"^(?:<\d+>)?([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?\b")
KLOG_RE = re.compile(r"^([IWEF])(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{1,9})\b")
EPOCH_RE = re.compile(r"^\[?(\d{10}(?:\.\d+)?|\d{13})\b")
LOGFMT_LEVEL_RE = re.compile(r"\b(?:level|lvl|severity)=\"?([A-Za-z]+)", re.I)
WORD_LEVEL_RE = re.compile(r"(?<![A-Za-z])(FATAL|CRITICAL|CRIT|PANIC|EMERG|ALERT|ERROR|ERR|SEVERE|WARNING|WARN"
                           r"|NOTICE|INFO|DEBUG|TRACE)(?![A-Za-z])")
BRACKET_LEVEL_RE = re.compile(r"[\[<(](fatal|critical|error|err|warning|warn|notice|info|debug|trace)[\]>):]", re.I)
ACCESS_STATUS_RE = re.compile(r"\"[A-Z]+ [^\"]*\" (\d{3}) ")
ERROR_WORDS_RE = re.compile(r"Traceback \(most recent call last\)|\bpanic:|OOMKilled|Out of memory|Killed process"
                            r"|segfault|\bException\b|[A-Za-z]+Exception\b|[A-Za-z]+Error:|core dumped"
                            r"|No space left on device|Too many open files")
JSON_TIME_KEYS = ["@timestamp", "timestamp", "time", "ts", "t", "datetime", "date", "eventTime", "event_time",
                  "created_at", "asctime", "logged_at"]
JSON_LEVEL_KEYS = ["level", "severity", "lvl", "log.level", "levelname", "loglevel", "log_level", "status"]
JSON_MSG_KEYS = ["message", "msg", "event", "log", "error", "err"]
NORMALIZE = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{12,}\b", re.I), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?"), "N"),
]


def parse_iso(s, tz):
    """Parses an ISO-like timestamp string. Returns (aware datetime, assumed_zone) or (None, False)."""
    m = ISO_RE.search(s)
    if not m:
        return None, False
    return iso_from_match(m, tz)


def iso_from_match(m, tz):
    y, mo, d, h, mi, se, frac, zone = m.groups()
    us = int((frac or "0")[:6].ljust(6, "0"))
    try:
        t = dt.datetime(int(y), int(mo), int(d), int(h), int(mi), min(int(se), 59), us)
    except ValueError:
        return None, False
    if zone in (None, ""):
        return t.replace(tzinfo=tz), True
    if zone in ("Z", "UTC", "GMT"):
        return t.replace(tzinfo=UTC), False
    zone = zone.replace(":", "")
    off = dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5]))
    return t.replace(tzinfo=dt.timezone(off if zone[0] == "+" else -off)), False


def from_epoch(x):
    x = float(x)
    if x > 1e17:
        x /= 1e9
    elif x > 1e14:
        x /= 1e6
    elif x > 1e11:
        x /= 1e3
    if not (1e8 < x < 4e9):
        return None
    return dt.datetime.fromtimestamp(x, UTC)


def year_for(month, day, mtime_dt, year_opt):
    if year_opt:
        return year_opt, True
    y = mtime_dt.year
    # A "Dec 31" line in a file last written on "Jan 2" belongs to the year before.
    if (month, day) > (mtime_dt.month, mtime_dt.day + 1):
        y -= 1
    return y, True


def norm_level(v):
    if v is None:
        return None
    if isinstance(v, (int, float)):
        # bunyan/pino numeric levels, or an HTTP status in "status"
        v = int(v)
        if 100 <= v < 600:
            return "error" if v >= 500 else "warn" if v >= 400 else "info"
        return {10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal"}.get(v)
    return LEVEL_ALIASES.get(str(v).strip().lower())


class Entry:
    __slots__ = ("time", "assumed", "level", "source", "line", "message", "extra")

    def __init__(self, time, assumed, level, source, line, message):
        self.time, self.assumed, self.level = time, assumed, level
        self.source, self.line, self.message, self.extra = source, line, message, 0


def parse_line(text, ctx):
    """Returns (time, assumed, level, message) or None when the line has no timestamp."""
    tz = ctx["tz"]
    s = text.lstrip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            t, assumed = None, False
            for k in JSON_TIME_KEYS:
                v = obj.get(k)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    t = from_epoch(v)
                elif isinstance(v, str):
                    if re.fullmatch(r"\d{10}(\.\d+)?|\d{13,19}", v):
                        t = from_epoch(v)
                    else:
                        t, assumed = parse_iso(v, tz)
                if t:
                    break
            if t:
                level = None
                for k in JSON_LEVEL_KEYS:
                    if k in obj:
                        level = norm_level(obj[k])
                        if level:
                            break
                msg, msg_key = None, None
                for k in JSON_MSG_KEYS:
                    if isinstance(obj.get(k), str):
                        msg, msg_key = obj[k], k
                        break
                rest = ["%s=%s" % (k, json.dumps(v) if not isinstance(v, str) else v) for k, v in obj.items()
                        if k not in JSON_TIME_KEYS and k not in JSON_LEVEL_KEYS and k != msg_key]
                message = ((msg or "") + ("  " if msg and rest else "") + " ".join(rest)).strip()
                if level is None:
                    level = guess_level(message)
                return t, assumed, level, message
    head = text[:120]
    t, assumed = None, False
    m = ISO_RE.search(head)
    if m and m.start() < 60:
        t, assumed = iso_from_match(m, tz)
    if t is None:
        m = CLF_RE.search(head)
        if m and m.group(2).lower() in MONTHS:
            d, mon, y, h, mi, se, frac, zone = m.groups()
            try:
                t = dt.datetime(int(y), MONTHS[mon.lower()], int(d), int(h), int(mi), int(se),
                                int((frac or "0")[:6].ljust(6, "0")))
                off = dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5]))
                t = t.replace(tzinfo=dt.timezone(off if zone[0] == "+" else -off))
            except ValueError:
                t = None
    if t is None:
        m = KLOG_RE.match(text)
        if m:
            sev, mo, d, h, mi, se, frac = m.groups()
            y, _ = year_for(int(mo), int(d), ctx["mtime"], ctx["year"])
            try:
                t = dt.datetime(y, int(mo), int(d), int(h), int(mi), int(se), int(frac[:6].ljust(6, "0")),
                                tzinfo=tz)
                assumed = True
                ctx["yearless"] = True
                return t, assumed, norm_level(sev), text.rstrip()
            except ValueError:
                t = None
    if t is None:
        m = SYSLOG_RE.match(text)
        if m and m.group(1).lower() in MONTHS:
            mon, d, h, mi, se, frac = m.groups()
            y, _ = year_for(MONTHS[mon.lower()], int(d), ctx["mtime"], ctx["year"])
            try:
                t = dt.datetime(y, MONTHS[mon.lower()], int(d), int(h), int(mi), int(se),
                                int((frac or "0")[:6].ljust(6, "0")), tzinfo=tz)
                assumed = True
                ctx["yearless"] = True
            except ValueError:
                t = None
    if t is None:
        m = EPOCH_RE.match(text)
        if m:
            t = from_epoch(m.group(1))
    if t is None:
        return None
    return t, assumed, guess_level(text), text.rstrip()


def guess_level(text):
    m = LOGFMT_LEVEL_RE.search(text)
    if m and norm_level(m.group(1)):
        return norm_level(m.group(1))
    m = BRACKET_LEVEL_RE.search(text[:200])
    if m:
        return norm_level(m.group(1))
    m = WORD_LEVEL_RE.search(text[:200])
    if m:
        return norm_level(m.group(1))
    m = ACCESS_STATUS_RE.search(text)
    if m:
        return norm_level(int(m.group(1)))
    if ERROR_WORDS_RE.search(text):
        return "error"
    return None


def iter_files(paths):
    for p in paths:
        if os.path.isdir(p):
            for dirpath, dirnames, filenames in os.walk(p):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".git"))
                for f in sorted(filenames):
                    yield os.path.join(dirpath, f)
        elif os.path.exists(p):
            yield p
        else:
            print("log_timeline: no such file or directory: %s" % p, file=sys.stderr)


def open_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    f = opener(path, "rb")
    head = f.read(8192)
    if b"\0" in head:
        f.close()
        return None
    f.close()
    return opener(path, "rt", encoding="utf-8", errors="replace", newline=None)


def parse_when(s, tz, ref_date=None):
    """--since/--until: ISO date-times, a bare date, or HH:MM[:SS] on the day of the first entry."""
    if s is None:
        return None
    s = s.strip()
    if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", s):
        if ref_date is None:
            raise SystemExit("log_timeline: a time without a date needs entries to take the date from")
        parts = [int(x) for x in s.split(":")] + [0]
        return dt.datetime(ref_date.year, ref_date.month, ref_date.day, parts[0], parts[1], parts[2], tzinfo=tz)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
        return dt.datetime.strptime(s, "%Y-%m-%d").replace(tzinfo=tz)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", s):
        s += ":00"
    t, _ = parse_iso(s, tz)
    if t is None:
        raise SystemExit("log_timeline: cannot read the time %r (use 2024-05-01T14:02:00Z or 14:02)" % s)
    return t


def parse_tz(s):
    if s.upper() in ("UTC", "Z", "GMT"):
        return UTC
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", s)
    if not m:
        raise SystemExit("log_timeline: --tz takes UTC or an offset like +02:00 (not a zone name)")
    off = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
    return dt.timezone(off if m.group(1) == "+" else -off)


def fmt_time(t):
    t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def signature(msg):
    s = msg
    for rx in (ISO_RE, CLF_RE, SYSLOG_RE, KLOG_RE):
        m = rx.search(s[:80])
        if m and m.start() < 60:
            s = s[:m.start()] + s[m.end():]
            break
    for rx, rep in NORMALIZE:
        s = rx.sub(rep, s)
    return re.sub(r"\s+", " ", s).strip()[:160]


def collect(args):
    tz = parse_tz(args.tz)
    greps = [re.compile(g, re.I if args.ignore_case else 0) for g in (args.grep or [])]
    min_level = LEVELS[args.level] if args.level else None
    files = []
    entries = []
    for path in iter_files(args.paths or ["/workspace/input"]):
        try:
            st = os.stat(path)
            f = open_text(path)
        except OSError as e:
            files.append({"path": path, "error": str(e)})
            continue
        if f is None:
            files.append({"path": path, "skipped": "binary"})
            continue
        ctx = {"tz": tz, "year": args.year, "mtime": dt.datetime.fromtimestamp(st.st_mtime, UTC), "yearless": False}
        info = {"path": path, "lines": 0, "entries": 0, "untimed_lines": 0, "first": None, "last": None,
                "levels": collections.Counter(), "assumed_zone": False, "first_error": None}
        cur = None
        with f:
            for n, raw in enumerate(f, 1):
                info["lines"] = n
                text = raw.rstrip("\n")
                if not text.strip():
                    continue
                p = parse_line(text, ctx)
                if p is None:
                    if cur is not None:
                        cur.extra += 1
                        if cur.level is None and ERROR_WORDS_RE.search(text):
                            cur.level = "error"
                    else:
                        info["untimed_lines"] += 1
                    continue
                t, assumed, level, message = p
                cur = Entry(t, assumed, level, path, n, message)
                entries.append(cur)
                info["entries"] += 1
                if assumed:
                    info["assumed_zone"] = True
        info["yearless"] = ctx["yearless"]
        files.append(info)
    # File statistics, then filters.
    by_path = {f["path"]: f for f in files}
    for e in entries:
        info = by_path[e.source]
        info["levels"][e.level or "unknown"] += 1
        if info["first"] is None or e.time < info["first"]:
            info["first"] = e.time
        if info["last"] is None or e.time > info["last"]:
            info["last"] = e.time
        if e.level in ("error", "fatal") and (info["first_error"] is None or e.time < info["first_error"][0]):
            info["first_error"] = (e.time, e.line, e.message)
    ref = min((e.time for e in entries), default=None)
    since = parse_when(args.since, tz, ref.astimezone(tz) if ref else None)
    until = parse_when(args.until, tz, ref.astimezone(tz) if ref else None)
    if until is not None and args.until and re.fullmatch(r"\d{4}-\d{2}-\d{2}", args.until.strip()):
        until += dt.timedelta(days=1)  # a bare date means the whole day
    out = []
    for e in entries:
        if since and e.time < since:
            continue
        if until and e.time > until:
            continue
        if min_level is not None and LEVELS.get(e.level, -1) < min_level:
            continue
        if greps and not any(g.search(e.message) for g in greps):
            continue
        out.append(e)
    out.sort(key=lambda e: (e.time, e.source, e.line))
    return files, out


def bucket_size(span, opt):
    if opt:
        m = re.fullmatch(r"(\d+)([smh])", opt)
        if not m:
            raise SystemExit("log_timeline: --buckets takes e.g. 30s, 1m, 5m, 1h")
        return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]
    secs = span.total_seconds()
    for size in (10, 60, 300, 900, 3600, 21600, 86400):
        if secs / size <= 60:
            return size
    return 86400


def print_summary(files, entries, args):
    print("files:")
    for f in files:
        if "error" in f:
            print("  %s: cannot read (%s)" % (f["path"], f["error"]))
            continue
        if "skipped" in f:
            print("  %s: skipped (%s)" % (f["path"], f["skipped"]))
            continue
        if not f["entries"]:
            print("  %s: %d lines, no timestamps (config or plain text: read it directly)" % (f["path"], f["lines"]))
            continue
        lv = ", ".join("%s %d" % (k, v) for k, v in sorted(f["levels"].items(), key=lambda kv: -LEVELS.get(kv[0], -1)))
        notes = []
        if f["assumed_zone"]:
            notes.append("no zone in timestamps: read as %s" % args.tz)
        if f["yearless"]:
            notes.append("no year in timestamps: %s" % ("--year %d" % args.year if args.year else "year from file mtime"))
        print("  %s: %d lines, %d entries, %s .. %s" % (f["path"], f["lines"], f["entries"], fmt_time(f["first"]),
                                                        fmt_time(f["last"])))
        print("      levels: %s" % lv)
        if f["untimed_lines"]:
            print("      %d lines before the first timestamp" % f["untimed_lines"])
        for n in notes:
            print("      note: " + n)
        if f["first_error"]:
            t, line, msg = f["first_error"]
            print("      first error: %s line %d: %s" % (fmt_time(t), line, msg[:160]))
    if not entries:
        print("\nno timestamped entries match")
        return
    first, last = entries[0].time, entries[-1].time
    size = bucket_size(last - first, args.buckets)
    print("\nall sources: %d entries, %s .. %s" % (len(entries), fmt_time(first), fmt_time(last)))
    errs = [e for e in entries if e.level in ("error", "fatal")]
    if errs:
        e = errs[0]
        print("earliest error: %s %s:%d: %s" % (fmt_time(e.time), e.source, e.line, e.message[:160]))
    buckets = collections.OrderedDict()
    epoch0 = int(first.timestamp()) // size * size
    for e in entries:
        k = int(e.time.timestamp()) // size * size
        b = buckets.setdefault(k, [0, 0, 0])
        b[0] += 1
        if e.level == "warn":
            b[1] += 1
        elif e.level in ("error", "fatal"):
            b[2] += 1
    print("\nper %s (entries / warnings / errors):" % human(size))
    peak = max(b[2] for b in buckets.values()) or 1
    k = epoch0
    end = int(last.timestamp())
    rows, empty_run = 0, 0
    while k <= end and rows < 400:
        b = buckets.get(k)
        if b is None:
            empty_run += 1
            k += size
            continue
        if empty_run > 2:
            print("  %s  (%d empty buckets: nothing logged)" % (" " * 20, empty_run))
        else:
            for j in range(empty_run, 0, -1):
                print("  %s  %6d %6d %6d" % (fmt_time(dt.datetime.fromtimestamp(k - j * size, UTC))[:19] + "Z", 0, 0, 0))
        empty_run = 0
        bar = "#" * (0 if not b[2] else max(1, round(40 * b[2] / peak)))
        print("  %s  %6d %6d %6d  %s" % (fmt_time(dt.datetime.fromtimestamp(k, UTC))[:19] + "Z", b[0], b[1], b[2], bar))
        k += size
        rows += 1
    if rows >= 400:
        print("  ... (more buckets; use --since/--until or a larger --buckets)")
    sig = collections.OrderedDict()
    for e in errs:
        s = signature(e.message)
        v = sig.setdefault(s, [0, e, e])
        v[0] += 1
        v[2] = e
    if sig:
        print("\nmost frequent error messages (numbers, ids and addresses normalized):")
        for s, (count, fe, le) in sorted(sig.items(), key=lambda kv: -kv[1][0])[:15]:
            print("  %6d  first %s (%s:%d)  last %s" % (count, fmt_time(fe.time), fe.source, fe.line, fmt_time(le.time)))
            print("          %s" % s)


def human(secs):
    if secs % 3600 == 0:
        return "%dh" % (secs // 3600)
    if secs % 60 == 0:
        return "%dm" % (secs // 60)
    return "%ds" % secs


def main(argv=None):
    ap = argparse.ArgumentParser(description="Merge logs into one UTC timeline, or summarize them.")
    ap.add_argument("paths", nargs="*", help="files or directories (default /workspace/input)")
    ap.add_argument("--summary", action="store_true", help="per-file ranges, levels, error histogram, top errors")
    ap.add_argument("--since", help="start: 2024-05-01T14:00:00Z, 2024-05-01 14:00, 2024-05-01 or 14:00")
    ap.add_argument("--until", help="end, same forms as --since")
    ap.add_argument("--level", choices=["debug", "info", "warn", "error", "fatal"], help="minimum level")
    ap.add_argument("--grep", action="append", help="keep entries matching this regex (repeatable: any matches)")
    ap.add_argument("-i", "--ignore-case", action="store_true", help="case-insensitive --grep")
    ap.add_argument("--tz", default="UTC", help="zone for timestamps without one: UTC or +HH:MM (default UTC)")
    ap.add_argument("--year", type=int, help="year for formats without one (syslog, klog); default from file mtime")
    ap.add_argument("--buckets", help="histogram bucket for --summary, e.g. 1m, 5m, 1h (default: automatic)")
    ap.add_argument("--limit", type=int, default=500, help="at most this many timeline entries (default 500)")
    ap.add_argument("--width", type=int, default=300, help="cut messages at this many characters (default 300)")
    ap.add_argument("--json", action="store_true", help="print the timeline as JSON")
    args = ap.parse_args(argv)
    files, entries = collect(args)
    if args.summary:
        print_summary(files, entries, args)
        return 0
    shown = entries[:args.limit] if args.limit > 0 else entries
    if args.json:
        json.dump([{"time": fmt_time(e.time), "level": e.level, "source": "%s:%d" % (e.source, e.line),
                    "message": e.message[:args.width], "continuation_lines": e.extra,
                    "zone_assumed": e.assumed} for e in shown], sys.stdout, indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        for e in shown:
            msg = e.message if len(e.message) <= args.width else e.message[:args.width] + "…"
            print("%s%s %-5s %s:%d  %s%s" % (fmt_time(e.time), "~" if e.assumed else " ", (e.level or "-").upper(),
                                             e.source, e.line, msg, "  [+%d lines]" % e.extra if e.extra else ""))
        if any(e.assumed for e in shown):
            print("(~ marks a time read without a zone, as %s)" % args.tz, file=sys.stderr)
    if len(entries) > len(shown):
        print("log_timeline: %d more entries not shown; narrow with --since/--until/--level/--grep or raise --limit"
              % (len(entries) - len(shown)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
