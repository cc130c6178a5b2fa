/* child_limits: how deep a tree of child workflows may go and how many
 * children one workflow may have running at once. The operator sets
 * child_max_depth and child_max_fanout (settings.c); a call's max_depth and
 * max_fanout options may ask for less, never more.
 *
 * Both are measured in the store, never in memory, so they hold after a
 * restart and with several workers on PostgreSQL: a child's depth is its
 * parent's (the parent column, followed up to a root) plus one; a parent's
 * running children are its children's rows not ended, those this batch
 * started included (they are in the open transaction). Only the parent's own
 * run starts its children, under its lease, so no other worker adds one
 * between the count and the start.
 *
 * What was measured is kept in the run as an upper bound (wfrun's
 * depth_bound and running_bound), so a parent starting ten children counts
 * once, not ten times (a round trip each on PostgreSQL): its depth can only
 * shrink (a row purged), its children running only by ending, and only its
 * own starts, each added to the bound, raise the count while its run is
 * cached (a cached run holds its lease: one released or lost drops the run,
 * engine/worker/runs.c). A bound under the limit lets the start go; one at
 * or over it is measured again in the store, and only that measure
 * refuses, so every refusal and every start is what a count in the store
 * would decide.
 *
 * A start over a limit is refused with ChildLimit (an option over the
 * operator's limit with InvalidOptions), which children.c records as the
 * child's outcome: a replay takes the recorded refusal whatever the limits
 * are by then. */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json.h"

/* The chain of parents is followed at most this far: the deepest tree the
 * setting's range allows, and a bound should rows ever make a loop. */
#define DEPTH_CAP 1000

/* The operator's limit now (a SIGHUP may change it); a bad environment value
 * was refused when the command started (cli.c), so the default stands in. */
static long long operator_limit(const char *key) {
  long long v;
  char err[160];
  config_int(key, &v, err, sizeof err);
  return v;
}

/* The call's option key as a whole number (the VM checked it is one, 1 or
 * more), or -1 when it is not given. */
static long long call_limit(const char *options, const char *key) {
  const char *v;
  size_t n;
  if (!options || *options != '{' || json_get(options, strlen(options), key, &v, &n) != 1) return -1;
  char text[32];
  snprintf(text, sizeof text, "%.*s", (int)(n < sizeof text ? n : sizeof text - 1), v);
  double d = strtod(text, NULL);
  return d >= 1 && d < 1e15 ? (long long)d : -1;
}

/* {"child":ID,[extra,]"limit":L,"max":N,"message":M,"type":T}: the keys in
 * order (extra is "depth" and comes before "limit"; "running" after "message"). */
static char *refusal(const char *child, const char *type, const char *limit, long long max, const char *msg,
                     const char *extra, long long value) {
  char *qc = json_quote(child), *ql = json_quote(limit), *qm = json_quote(msg), *qt = json_quote(type);
  char before[64] = "", after[64] = "";
  if (extra && strcmp(extra, "running") == 0) snprintf(after, sizeof after, "\"running\":%lld,", value);
  else if (extra) snprintf(before, sizeof before, "\"%s\":%lld,", extra, value);
  char *out = util_fmt("{\"child\":%s,%s\"limit\":%s,\"max\":%lld,\"message\":%s,%s\"type\":%s}", qc, before, ql, max,
                       qm, after, qt);
  free(qc);
  free(ql);
  free(qm);
  free(qt);
  return out;
}

/* The limit in force for one measure: the operator's, or the call's when it
 * asks for less. 0 with *limit and *max set; 1 when the call asks for more
 * (*out the InvalidOptions refusal). */
static int limit_in_force(const char *child, const char *options, const char *setting, const char *option,
                          const char **limit, long long *max, char **out) {
  long long op = operator_limit(setting), call = call_limit(options, option);
  *limit = setting;
  *max = op;
  if (call < 0) return 0;
  if (call > op) {
    char msg[256];
    snprintf(msg, sizeof msg, "option '%s' is %lld, more than the engine's %s %lld", option, call, setting, op);
    *out = refusal(child, "InvalidOptions", setting, op, msg, NULL, 0);
    return 1;
  }
  if (call < op) *limit = option, *max = call;
  return 0;
}

/* How the message names the limit: the setting, or the call's option. */
static const char *limit_name(const char *limit, char *buf, size_t len) {
  if (strncmp(limit, "child_", 6) == 0) return limit;
  snprintf(buf, len, "the call's %s", limit);
  return buf;
}

/* r's depth: its bound (*kept set), or measured in the store (fresh, or none yet). */
static int64_t depth_of(engine *e, wfrun *r, int fresh, int *kept) {
  *kept = 0;
  if (!r->parent) return 0; /* a root's is 0 without a query */
  if (!fresh && r->depth_bound > 0) return *kept = 1, r->depth_bound - 1;
  int64_t d = store_wf_depth(e->st, r->id, DEPTH_CAP);
  if (d >= 0) r->depth_bound = d + 1;
  return d;
}

/* r's children running: the bound (*kept set), or counted in the store (fresh, or none yet). */
static int64_t running_of(engine *e, wfrun *r, int fresh, int *kept) {
  *kept = 0;
  if (!fresh && r->running_bound > 0) return *kept = 1, r->running_bound - 1;
  int64_t n = store_wf_children_running(e->st, r->id);
  if (n >= 0) r->running_bound = n + 1;
  return n;
}

int child_limits_check(engine *e, wfrun *r, const char *child, const char *options, char **out) {
  *out = NULL;
  const char *limit;
  long long max;
  char msg[ENGINE_ID_MAX + 256], named[64];
  if (limit_in_force(child, options, "child_max_depth", "max_depth", &limit, &max, out)) return 1;
  int kept;
  int64_t depth = depth_of(e, r, 0, &kept);
  if (kept && depth + 1 > max) depth = depth_of(e, r, 1, &kept); /* a bound: measured before it refuses */
  if (depth < 0) return -1;
  if (depth + 1 > max) {
    snprintf(msg, sizeof msg, "child depth %lld is over %s %lld (its parent %s is at depth %lld)",
             (long long)depth + 1, limit_name(limit, named, sizeof named), max, r->id, (long long)depth);
    *out = refusal(child, "ChildLimit", limit, max, msg, "depth", depth + 1);
    return 1;
  }
  if (limit_in_force(child, options, "child_max_fanout", "max_fanout", &limit, &max, out)) return 1;
  int64_t running = running_of(e, r, 0, &kept);
  if (kept && running >= max) running = running_of(e, r, 1, &kept); /* a bound: counted before it refuses */
  if (running < 0) return -1;
  if (running >= max) {
    snprintf(msg, sizeof msg, "parent %s has %lld %s running, %s is %lld", r->id, (long long)running,
             running == 1 ? "child" : "children", limit_name(limit, named, sizeof named), max);
    *out = refusal(child, "ChildLimit", limit, max, msg, "running", running);
    return 1;
  }
  r->running_bound = running + 2; /* this start counted: running + 1, plus one */
  return 0;
}
