/* Unit tests for engine/wfvm, driven directly through a fake host: a C struct
 * that records the events the VM appends into an in-memory hist_list (the run's
 * history, to which the tests also append outcomes as the engine would) and the
 * domain events it emits. Every case frees its VMs; run under ASan/LSan
 * (-DENGINE_SANITIZE=ON) any leak fails the suite.
 *
 * Tests whose name starts with BUG_ document an engine defect: they run as the
 * ctest entry unit_wfvm_bugs, fail against the current engine/vm/wfvm.c and pass
 * once it is fixed (see the comment at each one for the cause). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"
#include "wfvm.h"

/* ---------------------------------------------------------- fake host --- */

typedef struct fake {
  hist_list rec;     /* the run's history: WorkflowStarted, appended commands, outcomes */
  int appends;       /* host.append calls */
  int emits;         /* host.emit calls */
  char emit_type[8][64];
  char emit_payload[8][256];
  int loads;         /* host.load_module calls */
  char prints[512];
  int64_t clock;     /* time stamped on events unless real_clock */
  int real_clock;    /* stamp util_now_ms() like the engine's run_append ... */
  int append_ms;     /* ... and take this long to append (a slow disk) */
} fake;

static void hpush(hist_list *l, int64_t seq, const char *type, int64_t ref, const char *name, const char *hash,
                  const char *payload, int64_t time) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
  }
  l->v[l->n++] =
      (hist_event){seq, util_strdup(type), ref, util_strdup(name), util_strdup(hash), util_strdup(payload), time, NULL};
}

static hist_list hcopy(const hist_list *src) {
  hist_list l = {0};
  for (size_t i = 0; i < src->n; i++) {
    const hist_event *e = &src->v[i];
    hpush(&l, e->seq, e->type, e->ref, e->name, e->hash, e->payload, e->time);
  }
  return l;
}

static int64_t next_seq(const fake *f) { return f->rec.n ? f->rec.v[f->rec.n - 1].seq + 1 : 1; }

static int64_t stamp(fake *f) {
  if (f->real_clock) return util_now_ms();
  f->clock += 1000;
  return f->clock;
}

static int64_t fake_append(void *ud, const char *type, int64_t ref, const char *name, const char *hash,
                           const char *payload, int64_t *time) {
  fake *f = ud;
  int64_t seq = next_seq(f);
  int64_t t = stamp(f);
  hpush(&f->rec, seq, type, ref, name, hash, payload, t);
  if (time) *time = t;
  if (f->append_ms) usleep((useconds_t)f->append_ms * 1000);
  f->appends++;
  return seq;
}

static int64_t fake_emit(void *ud, const char *type, const char *payload) {
  fake *f = ud;
  if (f->emits < 8) {
    snprintf(f->emit_type[f->emits], 64, "%s", type);
    snprintf(f->emit_payload[f->emits], 256, "%s", payload);
  }
  return ++f->emits;
}

static char *fake_load_module(void *ud, const char *name, size_t *len, char **chunkname, char *err, size_t errlen) {
  fake *f = ud;
  f->loads++;
  if (strcmp(name, "helper") == 0) {
    const char *src = "local M = {}\nfunction M.double(x) return x * 2 end\nM.loaded_as = ...\nreturn M\n";
    *len = strlen(src);
    *chunkname = util_strdup("@helper.lua");
    return util_strdup(src);
  }
  util_seterr(err, errlen, "no module '%s' in the fake host", name);
  return NULL;
}

static void fake_print(void *ud, const char *msg) {
  fake *f = ud;
  size_t n = strlen(f->prints);
  snprintf(f->prints + n, sizeof f->prints - n, "%s|", msg);
}

/* A fake whose history holds only WorkflowStarted(input, seed). */
static void fake_init(fake *f, const char *input_json, const char *seed) {
  memset(f, 0, sizeof *f);
  f->clock = 1700000000000;
  char *payload = util_fmt("{\"input\":%s,\"seed\":\"%s\"}", input_json, seed);
  hpush(&f->rec, 1, "WorkflowStarted", 0, NULL, NULL, payload, f->clock);
  free(payload);
}

static void fake_free(fake *f) { hist_list_free(&f->rec); }

static wfvm_config base_cfg(void) {
  wfvm_config c;
  wfvm_config_default(&c);
  c.mem_limit = (size_t)64 << 20;
  c.instr_limit = 50000000;
  c.check_only = 0;
  return c;
}

/* A VM over a copy of history (wfvm_new takes ownership of the copy). */
static wfvm *vm_new(fake *f, const wfvm_config *cfg, const hist_list *history) {
  hist_list h = hcopy(history);
  wfvm_host host = {f, fake_append, fake_emit, fake_load_module, fake_print};
  wfvm *vm = wfvm_new(cfg, &host, "wf-1", 1, &h);
  assert_non_null(vm);
  assert_null(h.v); /* ownership taken, list emptied */
  assert_int_equal(h.n, 0);
  return vm;
}

static wfvm_state start(wfvm *vm, const char *src) { return wfvm_start(vm, src, strlen(src), "@wf.lua"); }

/* Appends the outcome of the command the VM is blocked on to the fake's history
 * (as the engine does) and delivers it. */
static wfvm_state deliver(fake *f, wfvm *vm, const char *type, const char *payload) {
  const wfvm_cmd *c = wfvm_blocked(vm);
  hpush(&f->rec, next_seq(f), type, c->seq, c->name, NULL, payload, stamp(f));
  hist_event ev = f->rec.v[f->rec.n - 1]; /* strings stay owned by rec */
  return wfvm_deliver(vm, &ev);
}

static const char *state_name(wfvm_state s) {
  static const char *n[] = {"BLOCKED", "DONE", "FAILED", "STUCK", "KILLED", "CONTINUE", "END"};
  return (unsigned)s < 7 ? n[s] : "?";
}

#define assert_state(vm, got, want)                                                                          \
  do {                                                                                                       \
    wfvm_state got_ = (got);                                                                                 \
    if (got_ != (want))                                                                                      \
      fail_msg("state %s, expected %s; output: %s", state_name(got_), state_name(want), wfvm_output(vm)); \
  } while (0)

#define assert_contains(hay, needle)                                                  \
  do {                                                                                \
    const char *h_ = (hay);                                                           \
    if (!strstr(h_, (needle))) fail_msg("\"%s\" does not contain \"%s\"", h_, (needle)); \
  } while (0)

/* A replay of history through src in a fresh VM (g, cleared) to the state want. */
static wfvm *replay_as(fake *g, const wfvm_config *cfg, const hist_list *history, const char *src, wfvm_state want) {
  memset(g, 0, sizeof *g);
  wfvm *vm = vm_new(g, cfg, history);
  wfvm_state st = start(vm, src);
  assert_state(vm, st, want);
  return vm;
}

/* A replay of history through src in a fresh VM (g, cleared): it must run to
 * its end appending nothing. Returns the VM, for the caller's checks. */
static wfvm *replayed(fake *g, const wfvm_config *cfg, const hist_list *history, const char *src) {
  wfvm *vm = replay_as(g, cfg, history, src, WFVM_DONE);
  assert_int_equal(g->appends, 0);
  return vm;
}

/* Runs src live from a fresh history to its first state; the history grows in f. */
static wfvm *run_live(fake *f, const wfvm_config *cfg, const char *src, wfvm_state *st) {
  wfvm *vm = vm_new(f, cfg, &f->rec);
  *st = start(vm, src);
  return vm;
}

static const char *SEED = "00000000deadbeef";

/* ---------------------------------------------------------- activities --- */

static const char *GREET =
    "local wf = require 'workflow'\n"
    "return function(input)\n"
    "  local r = wf.activity('greet', {name = input.name}, {start_to_close = 30})\n"
    "  return {reply = r, name = input.name}\n"
    "end\n";

static void test_activity_blocks_then_completes(void **state) {
  (void)state;
  fake f;
  fake_init(&f, "{\"name\":\"bob\"}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, GREET, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  const wfvm_cmd *c = wfvm_blocked(vm);
  assert_string_equal(c->kind, "activity");
  assert_int_equal(c->is_new, 1);
  assert_int_equal(c->seq, 2);
  assert_string_equal(c->name, "greet");
  assert_string_equal(c->payload, "{\"args\":{\"name\":\"bob\"},\"options\":{\"start_to_close\":30}}");
  /* exactly one command was appended */
  assert_int_equal(f.appends, 1);
  assert_int_equal(f.rec.n, 2);
  assert_string_equal(f.rec.v[1].type, "ActivityScheduled");
  assert_string_equal(f.rec.v[1].name, "greet");
  assert_string_equal(f.rec.v[1].payload, c->payload);
  assert_int_equal(strlen(f.rec.v[1].hash), 16);
  assert_true(wfvm_mem_used(vm) > 0);

  st = deliver(&f, vm, "ActivityCompleted", "{\"greeting\":\"hi bob\"}");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"name\":\"bob\",\"reply\":{\"greeting\":\"hi bob\"}}");
  assert_int_equal(f.appends, 1);
  wfvm_free(vm);
  fake_free(&f);
}

static void test_full_replay_no_appends_same_result(void **state) {
  (void)state;
  fake f;
  fake_init(&f, "{\"name\":\"ann\"}", SEED);
  wfvm_config cfg = base_cfg();
  const char *src =
      "local wf = require 'workflow'\n"
      "return function(input)\n"
      "  local a = wf.activity('one', {n = 1})\n"
      "  local b = wf.activity('two', {prev = a})\n"
      "  wf.sleep(5)\n"
      "  local c = wf.checkpoint('ck', function() return a .. b end)\n"
      "  return {a = a, b = b, c = c, id = wf.uuid()}\n"
      "end\n";
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "ActivityCompleted", "\"A\"");
  assert_state(vm, st, WFVM_BLOCKED);
  assert_string_equal(wfvm_blocked(vm)->name, "two");
  st = deliver(&f, vm, "ActivityCompleted", "\"B\"");
  assert_state(vm, st, WFVM_BLOCKED);
  assert_string_equal(wfvm_blocked(vm)->kind, "timer");
  st = deliver(&f, vm, "TimerFired", NULL);
  assert_state(vm, st, WFVM_DONE);
  char *live = util_strdup(wfvm_output(vm));
  int live_appends = f.appends;
  assert_int_equal(live_appends, 4); /* 2 activities, timer, checkpoint */
  wfvm_free(vm);

  /* replay the whole recorded history in a new VM */
  fake g;
  vm = replayed(&g, &cfg, &f.rec, src);
  assert_string_equal(wfvm_output(vm), live);
  assert_int_equal(wfvm_cursor(vm), f.rec.n);
  assert_int_equal(wfvm_history_len(vm), f.rec.n);
  wfvm_free(vm);

  /* a prefix (the second activity scheduled, no outcome yet) blocks on the
   * recorded command without appending it again */
  hist_list prefix = hcopy(&f.rec);
  while (prefix.n > 4) {
    prefix.n--;
    hist_event *e = &prefix.v[prefix.n];
    free((char *)e->type);
    free((char *)e->name);
    free((char *)e->hash);
    free((char *)e->payload);
  }
  g.appends = 0;
  vm = vm_new(&g, &cfg, &prefix);
  st = start(vm, src);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_int_equal(wfvm_blocked(vm)->is_new, 0);
  assert_int_equal(wfvm_blocked(vm)->seq, 4);
  assert_string_equal(wfvm_blocked(vm)->name, "two");
  assert_int_equal(g.appends, 0);
  wfvm_free(vm);
  hist_list_free(&prefix);
  free(live);
  fake_free(&f);
}

/* ------------------------------------------------------ non-determinism --- */

static const char *CALLS_A =
    "local wf = require 'workflow'\n"
    "return function(input)\n"
    "  return wf.activity('a', {n = 1})\n"
    "end\n";
static const char *CALLS_B =
    "local wf = require 'workflow'\n"
    "return function(input)\n"
    "\n"
    "  return wf.activity('b', {n = 1})\n"
    "end\n";

/* Records a history where the script called activity 'a' and it completed. */
static void record_a(fake *f) {
  fake_init(f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(f, &cfg, CALLS_A, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(f, vm, "ActivityCompleted", "\"done-a\"");
  assert_state(vm, st, WFVM_DONE);
  wfvm_free(vm);
}

static void test_nondeterminism_is_stuck(void **state) {
  (void)state;
  fake f;
  record_a(&f);
  int before = f.appends;
  wfvm_config cfg = base_cfg();
  wfvm *vm = vm_new(&f, &cfg, &f.rec);
  wfvm_state st = wfvm_start(vm, CALLS_B, strlen(CALLS_B), "@wf_v2.lua");
  assert_state(vm, st, WFVM_STUCK);
  const char *msg = wfvm_output(vm);
  assert_contains(msg, "non-determinism");
  assert_contains(msg, "event #2");
  assert_contains(msg, "'a'");
  assert_contains(msg, "'b'");
  assert_contains(msg, "ActivityScheduled");
  assert_contains(msg, "wf_v2.lua:4");
  assert_int_equal(f.appends, before); /* nothing appended */
  wfvm_free(vm);

  /* same name, different arguments: also stuck */
  const char *other_args =
      "local wf = require 'workflow'\n"
      "return function(input) return wf.activity('a', {n = 2}) end\n";
  vm = vm_new(&f, &cfg, &f.rec);
  st = start(vm, other_args);
  assert_state(vm, st, WFVM_STUCK);
  assert_contains(wfvm_output(vm), "wf.lua:2");
  wfvm_free(vm);

  /* a different kind of command at the same place */
  const char *sleeps =
      "local wf = require 'workflow'\n"
      "return function(input) wf.sleep(1) end\n";
  vm = vm_new(&f, &cfg, &f.rec);
  st = start(vm, sleeps);
  assert_state(vm, st, WFVM_STUCK);
  assert_contains(wfvm_output(vm), "TimerStarted");
  wfvm_free(vm);

  /* the script returns while the history has more */
  const char *returns = "return function(input) return 1 end\n";
  vm = vm_new(&f, &cfg, &f.rec);
  st = start(vm, returns);
  assert_state(vm, st, WFVM_STUCK);
  assert_contains(wfvm_output(vm), "#2");
  wfvm_free(vm);
  assert_int_equal(f.appends, before);
  fake_free(&f);
}

static void test_pcall_cannot_swallow_stuck(void **state) {
  (void)state;
  fake f;
  record_a(&f);
  int before = f.appends;
  wfvm_config cfg = base_cfg();
  const char *scripts[] = {
      /* pcall directly around the primitive */
      "local wf = require 'workflow'\n"
      "return function(input)\n"
      "  local ok, e = pcall(wf.activity, 'b', {n = 1})\n"
      "  return 'swallowed'\n"
      "end\n",
      /* pcall around a function, then more commands */
      "local wf = require 'workflow'\n"
      "return function(input)\n"
      "  for i = 1, 3 do pcall(function() wf.activity('b', {n = i}) end) end\n"
      "  wf.activity('c')\n"
      "  return 'swallowed'\n"
      "end\n",
      /* xpcall with a handler, in a context that cannot yield (a sort comparator) */
      "local wf = require 'workflow'\n"
      "return function(input)\n"
      "  xpcall(table.sort, function(e) return e end, {3, 2, 1}, function(x, y) wf.activity('b') return x < y end)\n"
      "  return 'swallowed'\n"
      "end\n",
  };
  for (size_t i = 0; i < sizeof scripts / sizeof *scripts; i++) {
    wfvm *vm = vm_new(&f, &cfg, &f.rec);
    wfvm_state st = start(vm, scripts[i]);
    if (st != WFVM_STUCK) fail_msg("script %zu: state %s, output %s", i, state_name(st), wfvm_output(vm));
    /* in the sort comparator wf.activity refuses before appending (it cannot
     * wait there); the run then returns early, which replay also reports */
    assert_contains(wfvm_output(vm), i == 2 ? "non-determinism" : "'b'");
    assert_int_equal(f.appends, before);
    wfvm_free(vm);
  }
  fake_free(&f);
}

/* ------------------------------------------------------------ runaways --- */

/* Runs src live in a forked child (so an engine abort() cannot take the whole
 * suite down) and returns the child's wait status; the VM's end state is the
 * exit code and its output is copied into out. The child frees everything and
 * exits normally, so under ASan LeakSanitizer checks it too (exit code 23). */
static int run_in_child(const wfvm_config *cfg, const char *src, char *out, size_t outlen) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    fake f;
    fake_init(&f, "{}", SEED);
    hist_list h = hcopy(&f.rec);
    wfvm_host host = {&f, fake_append, fake_emit, fake_load_module, fake_print};
    wfvm *vm = wfvm_new(cfg, &host, "wf-1", 1, &h);
    if (!vm) _exit(100);
    wfvm_state st = wfvm_start(vm, src, strlen(src), "@wf.lua");
    const char *o = wfvm_output(vm);
    size_t n = strlen(o);
    if (write(fds[1], o, n) != (ssize_t)n) _exit(101);
    if (wfvm_mem_used(vm) > cfg->mem_limit + WFVM_MEM_RESERVE) _exit(102); /* the engine's reserve */
    close(fds[1]);
    wfvm_free(vm);
    fake_free(&f);
    exit((int)st);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < outlen && (r = read(fds[0], out + n, outlen - n - 1)) > 0) n += (size_t)r;
  out[n] = 0;
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

static void expect_killed(const wfvm_config *cfg, const char *src, const char *needle) {
  char out[1024];
  int status = run_in_child(cfg, src, out, sizeof out);
  if (WIFSIGNALED(status))
    fail_msg("the VM process died with signal %d (%s)\n%s", WTERMSIG(status), strsignal(WTERMSIG(status)), src);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != WFVM_KILLED)
    fail_msg("exit status %d, expected KILLED (%d); output %s\n%s", WEXITSTATUS(status), WFVM_KILLED, out, src);
  assert_contains(out, "\"type\":\"RunawayScript\"");
  assert_contains(out, needle);
}

static void test_instruction_budget(void **state) {
  (void)state;
  wfvm_config cfg = base_cfg();
  cfg.instr_limit = 100000;
  expect_killed(&cfg, "return function() while true do end end\n", "instruction budget exceeded (100000 instructions");
  /* pcall cannot swallow the stop, even repeatedly */
  expect_killed(&cfg,
                "return function()\n"
                "  local ok = pcall(function() while true do end end)\n"
                "  return 'swallowed'\n"
                "end\n",
                "instruction budget");
  expect_killed(&cfg,
                "return function()\n"
                "  while true do pcall(function() while true do end end) end\n"
                "end\n",
                "instruction budget");
  /* nor a loop where the VM cannot yield (inside a sort comparator) */
  expect_killed(&cfg,
                "return function()\n"
                "  pcall(table.sort, {3, 2, 1}, function(a, b) while true do end end)\n"
                "  return 'swallowed'\n"
                "end\n",
                "instruction budget");
  /* nor a nested coroutine */
  expect_killed(&cfg,
                "return function()\n"
                "  pcall(coroutine.wrap(function() while true do end end))\n"
                "  return 'swallowed'\n"
                "end\n",
                "instruction budget");
}

/* The budget is per resume: work under the budget before and after a command
 * completes, although the total is over it. */
static void test_instruction_budget_is_per_resume(void **state) {
  (void)state;
  wfvm_config cfg = base_cfg();
  cfg.instr_limit = 300000;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local x = 0\n"
      "  for i = 1, 60000 do x = x + i end\n"
      "  for i = 1, 60000 do x = x + i end\n"
      "  wf.activity('a')\n"
      "  for i = 1, 60000 do x = x + i end\n"
      "  for i = 1, 60000 do x = x + i end\n"
      "  return x\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "ActivityCompleted", "null");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "7200120000");
  wfvm_free(vm);
  /* the same work without the command in between exceeds the budget */
  const char *src2 =
      "return function()\n"
      "  local x = 0\n"
      "  for i = 1, 60000 do x = x + i end\n"
      "  for i = 1, 60000 do x = x + i end\n"
      "  for i = 1, 60000 do x = x + i end\n"
      "  for i = 1, 60000 do x = x + i end\n"
      "  return x\n"
      "end\n";
  fake_free(&f);
  expect_killed(&cfg, src2, "instruction budget");
}

/* Scripts that allocate past the limit; each must end KILLED. */
static const char *MEM_NUMBERS = /* a table of numbers: its array part doubles */
    "return function()\n"
    "  local t = {}\n"
    "  for i = 1, 1e9 do t[i] = i end\n"
    "end\n";
static const char *MEM_PCALL_BIG = /* one huge allocation, under pcall */
    "return function()\n"
    "  local ok = pcall(string.rep, 'x', 64 * 1024 * 1024)\n"
    "  return 'swallowed'\n"
    "end\n";
static const char *MEM_PCALL_TABLE = /* a growing table under pcall */
    "return function()\n"
    "  local t = {}\n"
    "  local ok = pcall(function() for i = 1, 1e9 do t[i] = i * 2 end end)\n"
    "  return {escaped = ok, n = #t}\n"
    "end\n";
static const char *MEM_SMALL_TABLES = /* many small tables: fills memory to the last byte */
    "return function()\n"
    "  local t = {}\n"
    "  local i = 0\n"
    "  while true do i = i + 1; t[i] = {i, tostring(i)} end\n"
    "end\n";
static const char *MEM_SMALL_STRINGS = /* the integration test's runaway.lua */
    "return function()\n"
    "  local t = {}\n"
    "  local ok = pcall(function() for i = 1, 1e9 do t[i] = string.rep('x', 64) .. i end end)\n"
    "  return {escaped = ok, n = #t}\n"
    "end\n";

static wfvm_config mem_cfg(void) {
  wfvm_config cfg = base_cfg();
  cfg.mem_limit = (size_t)8 << 20;
  cfg.instr_limit = 2000000000;
  return cfg;
}

static void test_memory_limit(void **state) {
  (void)state;
  wfvm_config cfg = mem_cfg();
  expect_killed(&cfg, MEM_NUMBERS, "memory limit exceeded (8 MiB");
  expect_killed(&cfg, MEM_PCALL_BIG, "memory limit");
  expect_killed(&cfg, MEM_PCALL_TABLE, "memory limit");
  expect_killed(&cfg, MEM_SMALL_STRINGS, "memory limit");
  /* a table growing under the limit is fine */
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg,
                      "return function() local t = {} for i = 1, 10000 do t[i] = {i} end return #t end\n", &st);
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "10000");
  assert_true(wfvm_mem_used(vm) < cfg.mem_limit);
  wfvm_free(vm);
  fake_free(&f);
}

/* A script that fills its memory with small objects is stopped, and the engine
 * process survives.
 *
 * BUG (engine/vm/wfvm.c, resume/message_json): when the limit stops a script, the
 * VM's memory is full to within a few bytes, and vm_alloc keeps refusing growth
 * (vm->co is still set). resume() then builds the KILLED output with
 * message_json(vm->L, ...), which allocates a table and strings in the main
 * state *outside any protected call*: the allocation fails, Lua raises
 * LUA_ERRMEM with no handler, the panic function runs and abort()s the whole
 * process -- every workflow of the worker dies with it. Fix: build the message
 * without allocating in the VM (e.g. format the JSON in C with json_quote), or
 * lift the limit (vm->co = NULL / a reserve) before touching the state after the
 * kill. */
static void BUG_memory_limit_small_objects_aborts(void **state) {
  (void)state;
  wfvm_config cfg = mem_cfg();
  const char *scripts[] = {MEM_SMALL_TABLES};
  int died = 0;
  for (int i = 0; i < 1; i++) {
    char out[1024];
    int status = run_in_child(&cfg, scripts[i], out, sizeof out);
    if (WIFSIGNALED(status)) {
      print_error("script %d: the VM process died with signal %d (%s)\n", i, WTERMSIG(status),
                  strsignal(WTERMSIG(status)));
      died++;
    } else {
      assert_true(WIFEXITED(status));
      assert_int_equal(WEXITSTATUS(status), WFVM_KILLED);
      assert_contains(out, "memory limit");
    }
  }
  assert_int_equal(died, 0);
}

/* -------------------------------------------------------------- sandbox --- */

static void test_sandbox(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "local json = require 'json'\n"
      "local helper = require 'helper'\n"
      "local helper2 = require 'helper'\n"
      "return function()\n"
      "  local forbidden = {\n"
      "    io = io, os = os, debug = debug, package = package, load = load, loadstring = loadstring,\n"
      "    dofile = dofile, loadfile = loadfile, ['math.random'] = math.random,\n"
      "    ['math.randomseed'] = math.randomseed, ['string.dump'] = string.dump,\n"
      "    ['_G.io'] = _G.io, ['_ENV.os'] = _ENV.os, ['_G.load'] = _G.load,\n"
      "  }\n"
      "  local leaks = {}\n"
      "  for name, v in pairs(forbidden) do leaks[#leaks + 1] = name end\n"
      "  local present = type(math.floor) == 'function' and type(string.format) == 'function'\n"
      "    and type(table.insert) == 'function' and type(pcall) == 'function' and type(utf8.char) == 'function'\n"
      "    and type(coroutine.wrap) == 'function' and type(wf.activity) == 'function'\n"
      "  local gc_ok = pcall(collectgarbage, 'collect')\n"
      "  local req_os = pcall(require, 'os')\n"
      "  local req_io = pcall(require, 'io')\n"
      "  local bad_name = pcall(require, '../etc/passwd')\n"
      "  return {leaks = table.concat(leaks, ','), present = present, gc = gc_ok,\n"
      "          req_os = req_os, req_io = req_io, bad_name = bad_name, json = json.encode({b = 1, a = 2}),\n"
      "          helper = helper.double(21), same = helper == helper2, loaded_as = helper.loaded_as,\n"
      "          count = pcall(collectgarbage, 'count')}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm),
                      "{\"bad_name\":false,\"count\":false,\"gc\":false,\"helper\":42,"
                      "\"json\":\"{\\\"a\\\":2,\\\"b\\\":1}\",\"leaks\":\"\",\"loaded_as\":\"helper\","
                      "\"present\":true,\"req_io\":false,\"req_os\":false,\"same\":true}");
  /* helper was loaded once (cached); os and io were asked of the host and refused;
   * the invalid name never reached the host */
  assert_int_equal(f.loads, 3);
  wfvm_free(vm);
  fake_free(&f);
}

/* string.dump is removed from the sandbox's string table.
 *
 * BUG (engine/vm/wfvm.c, build_sandbox): only the sandbox's *copy* of string loses
 * dump; the string metatable's __index is still the VM's original string
 * library, so ("").dump, ("x"):dump and getmetatable("").__index.dump all reach
 * string.dump (and the original library, which scripts can also modify). Fix:
 * point the string metatable's __index at the filtered copy (and hide the
 * metatable with __metatable). */
static void BUG_string_dump_reachable_via_metatable(void **state) {
  (void)state;
  const char *src =
      "return function()\n"
      "  return {method = type(('').dump), mt = type(getmetatable('').__index.dump)}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_DONE);
  char out[256];
  snprintf(out, sizeof out, "%s", wfvm_output(vm));
  wfvm_free(vm);
  fake_free(&f);
  assert_string_equal(out, "{\"method\":\"nil\",\"mt\":\"nil\"}");
}

/* ---------------------------------------------------------- determinism --- */

static const char *DET =
    "local wf = require 'workflow'\n"
    "return function()\n"
    "  local t0 = wf.now()\n"
    "  local r = {now0 = t0, f = wf.random(), i = wf.random(6), j = wf.random(10, 20), u1 = wf.uuid(),\n"
    "             u2 = wf.uuid()}\n"
    "  r.act = wf.activity('a')\n"
    "  r.now1 = wf.now()\n"
    "  r.after = wf.random(1000000)\n"
    "  return r\n"
    "end\n";

static char *run_det(const hist_list *h, int expect_appends) {
  fake g;
  memset(&g, 0, sizeof g);
  wfvm_config cfg = base_cfg();
  wfvm *vm = vm_new(&g, &cfg, h);
  wfvm_state st = start(vm, DET);
  assert_state(vm, st, WFVM_DONE);
  assert_int_equal(g.appends, expect_appends);
  char *out = util_strdup(wfvm_output(vm));
  wfvm_free(vm);
  return out;
}

static void test_now_random_uuid_deterministic(void **state) {
  (void)state;
  fake f;
  fake_init(&f, "{}", SEED);
  f.rec.v[0].time = 1700000000123;
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, DET, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "ActivityCompleted", "7");
  assert_state(vm, st, WFVM_DONE);
  char *live = util_strdup(wfvm_output(vm));
  wfvm_free(vm);
  int64_t completed_at = f.rec.v[f.rec.n - 1].time;

  char *r1 = run_det(&f.rec, 0);
  char *r2 = run_det(&f.rec, 0);
  assert_string_equal(r1, r2);
  assert_string_equal(r1, live);
  /* now comes from the log: the start time, then the outcome's time */
  assert_contains(r1, "\"now0\":1700000000.123");
  char want[64];
  snprintf(want, sizeof want, "\"now1\":%lld", (long long)(completed_at / 1000));
  assert_contains(r1, want);
  /* uuids are version 4, distinct */
  const char *u = strstr(r1, "\"u1\":\"");
  assert_non_null(u);
  u += 6;
  assert_int_equal(u[8], '-');
  assert_int_equal(u[13], '-');
  assert_int_equal(u[14], '4');
  assert_int_equal(u[18], '-');
  assert_non_null(strchr("89ab", u[19]));
  assert_int_equal(u[23], '-');
  assert_int_equal(u[36], '"');
  char u1[37];
  memcpy(u1, u, 36);
  u1[36] = 0;
  assert_null(strstr(strstr(r1, "\"u2\":\""), u1));

  /* another seed gives other values */
  hist_list other = hcopy(&f.rec);
  free((char *)other.v[0].payload);
  other.v[0].payload = util_strdup("{\"input\":{},\"seed\":\"00000000cafef00d\"}");
  char *r3 = run_det(&other, 0);
  assert_string_not_equal(r1, r3);
  assert_null(strstr(r3, u1));
  hist_list_free(&other);

  free(live);
  free(r1);
  free(r2);
  free(r3);
  fake_free(&f);
}

static const char *PAIRS =
    "return function()\n"
    "  local t = {}\n"
    "  for i = 1, 300 do local j = (i * 7919) % 300 + 1; t['k' .. j] = i end\n"
    "  for j = 7, 300, 7 do t['k' .. j] = nil end\n"
    "  t[3] = 'three'; t[1] = 'one'; t[2.5] = 'f'; t[true] = 'T'; t[false] = 'F'; t[-4] = 'neg'\n"
    "  local out = {}\n"
    "  for k, v in pairs(t) do out[#out + 1] = tostring(k) end\n"
    "  return table.concat(out, ' ')\n"
    "end\n";

static char *run_pairs(void) {
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, PAIRS, &st);
  assert_state(vm, st, WFVM_DONE);
  char *out = util_strdup(wfvm_output(vm));
  wfvm_free(vm);
  fake_free(&f);
  return out;
}

static void test_pairs_order_identical_across_vms(void **state) {
  (void)state;
  char *a = run_pairs();
  char *b = run_pairs();
  char *c = run_pairs();
  assert_string_equal(a, b);
  assert_string_equal(a, c);
  /* numbers ascending, then strings in byte order, then false, true */
  assert_true(strncmp(a, "\"-4 1 2.5 3 k1 k10 k100 k101 ", 29) == 0);
  size_t n = strlen(a);
  assert_true(n > 12 && strcmp(a + n - 12, " false true\"") == 0);
  char *copy = util_strdup(a + 12); /* from "k1" on */
  copy[strlen(copy) - 12] = 0;
  int count = 0;
  char *prev = NULL, *save = NULL;
  for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save), count++) {
    if (prev && strcmp(prev, tok) >= 0) fail_msg("pairs gave %s before %s", prev, tok);
    prev = tok;
  }
  assert_int_equal(count, 300 - 42); /* every remaining string key, once */
  free(copy);
  free(a);
  free(b);
  free(c);
}

/* ---------------------------------------------------------- checkpoints --- */

static const char *CKPT =
    "local wf = require 'workflow'\n"
    "return function()\n"
    "  local calls = 0\n"
    "  local v = wf.checkpoint('c1', function() calls = calls + 1; return {x = 41, s = 'live'} end)\n"
    "  local ok, err = pcall(wf.checkpoint, 'bad', function() error('nope') end)\n"
    "  local ok2, err2 = pcall(wf.checkpoint, 'nested', function() return wf.activity('x') end)\n"
    "  return {v = v, calls = calls, ok = ok, err = tostring(err):match('nope') or '', ok2 = ok2,\n"
    "          err2 = tostring(err2):match('inside a checkpoint') or tostring(err2)}\n"
    "end\n";

static void test_checkpoint_once(void **state) {
  (void)state;
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, CKPT, &st);
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"calls\":1,\"err\":\"nope\",\"err2\":\"inside a checkpoint\",\"ok\":false,"
                                       "\"ok2\":false,\"v\":{\"s\":\"live\",\"x\":41}}");
  wfvm_free(vm);
  /* only the successful checkpoint was recorded, with its value */
  assert_int_equal(f.appends, 1);
  assert_string_equal(f.rec.v[1].type, "CheckpointRecorded");
  assert_string_equal(f.rec.v[1].name, "c1");
  assert_string_equal(f.rec.v[1].payload, "{\"s\":\"live\",\"x\":41}");

  /* replay: the function does not run and the recorded value is returned */
  free((char *)f.rec.v[1].payload);
  f.rec.v[1].payload = util_strdup("{\"s\":\"recorded\",\"x\":99}");
  fake g;
  vm = replayed(&g, &cfg, &f.rec, CKPT);
  assert_contains(wfvm_output(vm), "\"calls\":0");
  assert_contains(wfvm_output(vm), "\"v\":{\"s\":\"recorded\",\"x\":99}");
  wfvm_free(vm);
  fake_free(&f);
}

/* -------------------------------------------------------------- patched --- */

static const char *PATCHED =
    "local wf = require 'workflow'\n"
    "return function()\n"
    "  if wf.patched('new-step') then\n"
    "    return {branch = 'new', r = wf.activity('b')}\n"
    "  end\n"
    "  return {branch = 'old', r = wf.activity('a', {n = 1})}\n"
    "end\n";

static void test_patched(void **state) {
  (void)state;
  /* live: true, and a marker is appended */
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, PATCHED, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_string_equal(wfvm_blocked(vm)->name, "b");
  assert_string_equal(f.rec.v[1].type, "PatchMarker");
  assert_string_equal(f.rec.v[1].name, "new-step");
  st = deliver(&f, vm, "ActivityCompleted", "1");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"branch\":\"new\",\"r\":1}");
  wfvm_free(vm);
  /* replaying that history: true again, nothing appended */
  fake g;
  vm = replayed(&g, &cfg, &f.rec, PATCHED);
  assert_string_equal(wfvm_output(vm), "{\"branch\":\"new\",\"r\":1}");
  wfvm_free(vm);
  fake_free(&f);

  /* an old history (recorded before the patch: activity 'a', no marker) */
  record_a(&f);
  vm = replay_as(&g, &cfg, &f.rec, PATCHED, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"branch\":\"old\",\"r\":\"done-a\"}");
  assert_int_equal(g.appends, 0);
  wfvm_free(vm);
  fake_free(&f);

  /* a marker the new code no longer asks about is skipped */
  fake_init(&f, "{}", SEED);
  vm = run_live(&f, &cfg, PATCHED, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "ActivityCompleted", "1");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(f.rec.v[1].type, "PatchMarker");
  wfvm_free(vm);
  const char *patch_removed =
      "local wf = require 'workflow'\n"
      "return function() return {branch = 'only', r = wf.activity('b')} end\n";
  vm = replay_as(&g, &cfg, &f.rec, patch_removed, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"branch\":\"only\",\"r\":1}");
  assert_int_equal(g.appends, 0);
  wfvm_free(vm);
  fake_free(&f);
}

/* ------------------------------------------------------- error outcomes --- */

static void test_activity_failure_is_catchable_table(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local ok, e = pcall(wf.activity, 'a')\n"
      "  local r = {ok = ok, type = e.type, message = e.message, s = tostring(e), t = type(e)}\n"
      "  r.second = wf.activity('b')\n"
      "  return r\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "ActivityFailed", "{\"type\":\"Boom\",\"message\":\"it broke\"}");
  assert_state(vm, st, WFVM_BLOCKED);
  assert_string_equal(wfvm_blocked(vm)->name, "b");
  /* not caught: the run fails with the activity's error type and message */
  st = deliver(&f, vm, "ActivityFailed", "{\"type\":\"Fatal\",\"message\":\"no way\"}");
  assert_state(vm, st, WFVM_FAILED);
  assert_contains(wfvm_output(vm), "\"type\":\"Fatal\"");
  assert_contains(wfvm_output(vm), "\"message\":\"no way\"");
  assert_contains(wfvm_output(vm), "\"stack\":");
  wfvm_free(vm);

  /* the caught error, as seen by the script */
  const char *src2 =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local ok, e = pcall(wf.activity, 'a')\n"
      "  return {ok = ok, type = e.type, message = e.message, s = tostring(e), t = type(e)}\n"
      "end\n";
  fake_free(&f);
  fake_init(&f, "{}", SEED);
  vm = run_live(&f, &cfg, src2, &st);
  st = deliver(&f, vm, "ActivityFailed", "{\"type\":\"Boom\",\"message\":\"it broke\"}");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm),
                      "{\"message\":\"it broke\",\"ok\":false,\"s\":\"Boom: it broke\",\"t\":\"table\",\"type\":\"Boom\"}");
  wfvm_free(vm);
  /* replay gives the same */
  fake g;
  vm = replay_as(&g, &cfg, &f.rec, src2, WFVM_DONE);
  assert_contains(wfvm_output(vm), "\"s\":\"Boom: it broke\"");
  wfvm_free(vm);
  fake_free(&f);
}

/* ---------------------------------------------------------- children --- */

/* wf.child and wf.start_child: the ChildStarted command (named by the
 * child's id, made from the run's id and a number unless opts.id), its
 * outcomes as results and errors, its replay and a replay that starts
 * another child; options checked before anything is recorded (max_depth and
 * max_fanout only as numbers: the worker weighs them against the engine's). */
/* A fork's copied prefix (ops/fork.c): events recorded as workflow "src"
 * replay as workflow "dst" when its WorkflowStarted names the step (forks):
 * the id where the source's stood, as a whole string or a child's id made
 * from it, reads as the source's; past the point wf.info().fork is the step
 * (nil before it). Without the step the same history does not replay. */
static const char *FORKED =
    "local wf = require 'workflow'\n"
    "return function(input)\n"
    "  local before = wf.info().fork\n"
    "  local r = wf.activity('greet', {id = wf.info().id, kid = wf.info().id .. '.1', n = input.n})\n"
    "  wf.emit('who', {id = wf.info().id})\n"
    "  local f = wf.info().fork\n"
    "  return {r = r, before = before == nil, model = f and f.with and f.with.model or 'none', from = f and f.id}\n"
    "end\n";

static wfvm *vm_as(fake *f, const char *id, const hist_list *history) {
  wfvm_config cfg = base_cfg();
  hist_list h = hcopy(history);
  wfvm_host host = {f, fake_append, fake_emit, fake_load_module, fake_print};
  wfvm *vm = wfvm_new(&cfg, &host, id, 1, &h);
  assert_non_null(vm);
  return vm;
}

static void test_fork_prefix_reads_the_source_id(void **state) {
  (void)state;
  fake f;
  fake_init(&f, "{\"n\":1}", SEED);
  wfvm *vm = vm_as(&f, "src", &f.rec);
  assert_state(vm, start(vm, FORKED), WFVM_BLOCKED);
  assert_state(vm, deliver(&f, vm, "ActivityCompleted", "\"hi\""), WFVM_DONE);
  assert_contains(wfvm_output(vm), "\"model\":\"none\"");
  wfvm_free(vm);
  assert_int_equal(f.rec.n, 4); /* started, scheduled, completed, emitted */

  /* the fork's history: its own WorkflowStarted, then the source's events */
  hist_list fork = hcopy(&f.rec);
  free((char *)fork.v[0].payload);
  fork.v[0].payload = util_strdup("{\"forks\":[{\"at\":4,\"id\":\"src\",\"run\":1,\"seq\":1,\"with\":{\"model\":\"m2\"}}],"
                                  "\"input\":{\"n\":1},\"seed\":\"00000000deadbeef\"}");
  fake g;
  memset(&g, 0, sizeof g);
  vm = vm_as(&g, "dst", &fork);
  assert_state(vm, start(vm, FORKED), WFVM_DONE);
  assert_int_equal(g.appends, 0);
  assert_int_equal(g.emits, 0);
  const char *out = wfvm_output(vm);
  assert_contains(out, "\"before\":true");    /* nil in the copied prefix */
  assert_contains(out, "\"model\":\"m2\"");   /* the step's, past its point */
  assert_contains(out, "\"from\":\"src\"");
  wfvm_free(vm);

  /* without the step the source's id is another's: non-determinism */
  free((char *)fork.v[0].payload);
  fork.v[0].payload = util_strdup("{\"input\":{\"n\":1},\"seed\":\"00000000deadbeef\"}");
  memset(&g, 0, sizeof g);
  vm = vm_as(&g, "dst", &fork);
  assert_state(vm, start(vm, FORKED), WFVM_STUCK);
  assert_contains(wfvm_output(vm), "non-determinism at event #2");
  wfvm_free(vm);

  /* an id that is only like the source's is not read as it */
  free((char *)fork.v[0].payload);
  fork.v[0].payload = util_strdup("{\"forks\":[{\"at\":4,\"id\":\"sr\",\"run\":1,\"seq\":1}],"
                                  "\"input\":{\"n\":1},\"seed\":\"00000000deadbeef\"}");
  memset(&g, 0, sizeof g);
  vm = vm_as(&g, "dst", &fork);
  assert_state(vm, start(vm, FORKED), WFVM_STUCK);
  wfvm_free(vm);

  /* forks that are not a list of {id, at} are refused */
  free((char *)fork.v[0].payload);
  fork.v[0].payload = util_strdup("{\"forks\":[{\"id\":\"src\"}],\"input\":{\"n\":1},\"seed\":\"00000000deadbeef\"}");
  memset(&g, 0, sizeof g);
  vm = vm_as(&g, "dst", &fork);
  assert_state(vm, start(vm, FORKED), WFVM_FAILED);
  assert_contains(wfvm_output(vm), "forks");
  wfvm_free(vm);
  hist_list_free(&fork);
  fake_free(&f);
}

static void test_child_commands(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local a = wf.start_child('kid', {n = 1})\n"
      "  local b = wf.start_child('kid.lua', {n = 2}, {id = 'mine', parent_close = 'abandon', timeout = 5,\n"
      "                                               max_depth = 2, max_fanout = 4})\n"
      "  local ok, e = pcall(wf.all, {a, b})\n"
      "  local c = wf.child('kid', nil)\n"
      "  return {ok = ok, type = e.type, child = e.child, c = c, a = a:wait()}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_int_equal(wfvm_pending_count(vm), 2);
  assert_string_equal(wfvm_pending_at(vm, 0)->kind, "child");
  assert_string_equal(wfvm_pending_at(vm, 0)->name, "wf-1.1");
  assert_string_equal(wfvm_pending_at(vm, 1)->name, "mine");
  assert_string_equal(wfvm_pending_at(vm, 0)->payload, "{\"input\":{\"n\":1},\"options\":{},\"script\":\"kid\"}");
  assert_contains(wfvm_pending_at(vm, 1)->payload, "\"parent_close\":\"abandon\"");
  assert_contains(wfvm_pending_at(vm, 1)->payload, "\"max_depth\":2,\"max_fanout\":4"); /* the worker weighs them */
  assert_string_equal(f.rec.v[1].type, "ChildStarted");
  /* outcomes in log order: the second fails, then the first completes */
  int64_t seq_a = wfvm_pending_at(vm, 0)->seq, seq_b = wfvm_pending_at(vm, 1)->seq;
  hpush(&f.rec, next_seq(&f), "ChildFailed", seq_b, "mine", NULL,
        "{\"child\":\"mine\",\"message\":\"no\",\"type\":\"KidError\"}", stamp(&f));
  st = wfvm_deliver(vm, &f.rec.v[f.rec.n - 1]);
  assert_state(vm, st, WFVM_BLOCKED);
  hpush(&f.rec, next_seq(&f), "ChildCompleted", seq_a, "wf-1.1", NULL, "{\"r\":1}", stamp(&f));
  st = wfvm_deliver(vm, &f.rec.v[f.rec.n - 1]);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_string_equal(wfvm_blocked(vm)->name, "wf-1.3"); /* numbered with the one that had its own id */
  assert_int_equal(wfvm_children_started(vm), 3);
  st = deliver(&f, vm, "ChildCompleted", "7");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"a\":{\"r\":1},\"c\":7,\"child\":\"mine\",\"ok\":false,\"type\":\"KidError\"}");
  wfvm_free(vm);

  /* replay: the same commands, no appends, the same result */
  fake g;
  vm = replayed(&g, &cfg, &f.rec, src);
  assert_contains(wfvm_output(vm), "\"c\":7");
  wfvm_free(vm);

  /* a script that starts another child where the log has one: stuck */
  const char *other =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local a = wf.start_child('kid', {n = 99})\n"
      "  return a:wait()\n"
      "end\n";
  vm = replay_as(&g, &cfg, &f.rec, other, WFVM_STUCK);
  assert_contains(wfvm_output(vm), "history has ChildStarted 'wf-1.1'");
  wfvm_free(vm);
  fake_free(&f);

  /* options checked first: nothing recorded */
  static const struct {
    const char *call, *want;
  } bad[] = {
      {"wf.child('kid', {}, {retry = {}})", "InvalidOptions: wf.child: unknown option 'retry'"},
      {"wf.child('kid', {}, {parent_close = 'never'})", "parent_close' must be terminate, request_cancel or abandon"},
      {"wf.child('kid', {}, {timeout = -1})", "InvalidOptions"},
      {"wf.child('kid', 5)", "InvalidArgument: wf.child: the input must be a table"},
      {"wf.child('', {})", "the script must be 1-1024 bytes"},
      {"wf.child('kid', {}, {id = 'a b'})", "InvalidArgument: wf.child: the child's id"},
      {"wf.child('kid', {}, {id = 'wf-1'})", "its own child"},
      {"wf.start_child('kid', {}, 'x')", "the options must be a table"},
      {"wf.child('kid', {}, {max_depth = 0})", "InvalidOptions: wf.child: option 'max_depth' must be a whole number"},
      {"wf.start_child('kid', {}, {max_fanout = 2.5})", "option 'max_fanout' must be a whole number from 1"},
      {"wf.child('kid', {}, {max_fanout = '3'})", "option 'max_fanout' must be a whole number"},
      {"wf.child('kid', {}, {max_depth = 0/0})", "option 'max_depth' must be a whole number"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *code = util_fmt("local wf = require 'workflow'\nreturn function()\n"
                          "  local ok, e = pcall(function() return %s end)\n  return tostring(e)\nend\n",
                          bad[i].call);
    fake h;
    fake_init(&h, "{}", SEED);
    vm = run_live(&h, &cfg, code, &st);
    assert_state(vm, st, WFVM_DONE);
    assert_contains(wfvm_output(vm), bad[i].want);
    assert_int_equal(h.appends, 0);
    wfvm_free(vm);
    fake_free(&h);
    free(code);
  }
}

/* ---------------------------------------------------- timers and signals --- */

static void test_sleep_and_signals(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  wf.sleep(3600)\n"
      "  local p, why = wf.wait_signal('approval', {timeout = 60})\n"
      "  local q = wf.wait_signal('approval')\n"
      "  return {p = p == nil and 'nil' or p, why = why, q = q}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_string_equal(wfvm_blocked(vm)->kind, "timer");
  assert_string_equal(f.rec.v[1].type, "TimerStarted");
  assert_contains(wfvm_blocked(vm)->payload, "\"fire_at\":");
  assert_contains(wfvm_blocked(vm)->payload, "\"seconds\":3600");
  st = deliver(&f, vm, "TimerFired", NULL);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_string_equal(wfvm_blocked(vm)->kind, "signal");
  assert_string_equal(wfvm_blocked(vm)->name, "approval");
  assert_contains(wfvm_blocked(vm)->payload, "\"deadline\":");
  st = deliver(&f, vm, "SignalTimedOut", NULL);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_string_equal(wfvm_blocked(vm)->payload, "{}"); /* no timeout */
  st = deliver(&f, vm, "SignalReceived", "{\"approved\":true}");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"p\":\"nil\",\"q\":{\"approved\":true},\"why\":\"timeout\"}");
  wfvm_free(vm);
  fake_free(&f);
}

/* -------------------------------------------------------------- emit --- */

static void test_emit_once(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  wf.emit('agent.message', {text = 'hi', n = 1})\n"
      "  print('hello', 42)\n"
      "  wf.activity('a')\n"
      "  return 'ok'\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_int_equal(f.emits, 1);
  assert_string_equal(f.emit_type[0], "agent.message");
  assert_string_equal(f.emit_payload[0], "{\"n\":1,\"text\":\"hi\"}");
  assert_string_equal(f.rec.v[1].type, "EventEmitted");
  assert_string_equal(f.rec.v[1].payload, "{\"seq\":1}");
  assert_true(strncmp(f.prints, "hello\t42", 8) == 0); /* printed live (exact text: see BUG_print_...) */
  st = deliver(&f, vm, "ActivityCompleted", "null");
  assert_state(vm, st, WFVM_DONE);
  wfvm_free(vm);

  fake g;
  vm = replayed(&g, &cfg, &f.rec, src);
  assert_int_equal(g.emits, 0);   /* not emitted again on replay */
  assert_string_equal(g.prints, ""); /* nor printed */
  wfvm_free(vm);
  fake_free(&f);
}

/* ----------------------------------------------------------- check_only --- */

/* wf.span: the run's description for its span in a trace, the last call's,
 * the same on replay; nothing recorded. */
static void test_span_description(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  wf.span({attributes = {['gen_ai.operation.name'] = 'invoke_workflow'}})\n"
      "  wf.activity('a')\n"
      "  wf.span({name = 'invoke_agent s', attributes = {['gen_ai.agent.name'] = 's', n = 2}})\n"
      "  local ok, err = pcall(wf.span, {big = string.rep('x', 20000)})\n"
      "  return {ok = ok, type = type(err) == 'table' and err.type}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_string_equal(wfvm_span(vm), "{\"attributes\":{\"gen_ai.operation.name\":\"invoke_workflow\"}}");
  size_t events = f.rec.n;
  st = deliver(&f, vm, "ActivityCompleted", "null");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"ok\":false,\"type\":\"InvalidArgument\"}"); /* over 16 KiB */
  const char *last = "{\"attributes\":{\"gen_ai.agent.name\":\"s\",\"n\":2},\"name\":\"invoke_agent s\"}";
  assert_string_equal(wfvm_span(vm), last);
  assert_int_equal(f.rec.n, events + 1); /* the activity's outcome only: a description is no event */
  wfvm_free(vm);

  fake g;
  vm = replayed(&g, &cfg, &f.rec, src);
  assert_string_equal(wfvm_span(vm), last);
  wfvm_free(vm);
  fake_free(&f);
  fake_free(&g);
}

/* wf.info().parent: the workflow that started this one (wfvm_set_parent, from
 * the workflows row), absent without one; the input cannot name another. */
static void test_info_parent(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function(input)\n"
      "  return {parent = wf.info().parent or 'none', claimed = input.parent}\n"
      "end\n";
  fake f;
  fake_init(&f, "{\"parent\":\"victim\"}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm *vm = vm_new(&f, &cfg, &f.rec);
  assert_state(vm, start(vm, src), WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"claimed\":\"victim\",\"parent\":\"none\"}");
  wfvm_free(vm);
  vm = vm_new(&f, &cfg, &f.rec);
  wfvm_set_parent(vm, "p1");
  assert_state(vm, start(vm, src), WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"claimed\":\"victim\",\"parent\":\"p1\"}");
  wfvm_free(vm);
  fake_free(&f);
}

static void test_check_only_ends_at_history_end(void **state) {
  (void)state;
  fake f;
  record_a(&f); /* WorkflowStarted, ActivityScheduled a, ActivityCompleted */
  wfvm_config cfg = base_cfg();
  cfg.check_only = 1;
  const char *more =
      "local wf = require 'workflow'\n"
      "return function(input)\n"
      "  local r = wf.activity('a', {n = 1})\n"
      "  wf.emit('x', {})\n"
      "  wf.activity('next')\n"
      "  return r\n"
      "end\n";
  /* a script that returns at the end of the history: DONE, with the result it
   * returns (the replay check compares it with the run's) */
  const char *scripts[] = {CALLS_A, more};
  for (int i = 0; i < 2; i++) {
    fake g;
    memset(&g, 0, sizeof g);
    wfvm *vm = vm_new(&g, &cfg, &f.rec);
    wfvm_state st = start(vm, scripts[i]);
    assert_state(vm, st, i == 0 ? WFVM_DONE : WFVM_END);
    if (i == 0) assert_string_equal(wfvm_output(vm), "\"done-a\"");
    assert_int_equal(g.appends, 0);
    assert_int_equal(g.emits, 0);
    assert_int_equal(wfvm_cursor(vm), 3);
    wfvm_free(vm);
  }
  /* a divergence is still reported in check mode */
  fake g;
  memset(&g, 0, sizeof g);
  wfvm *vm = vm_new(&g, &cfg, &f.rec);
  assert_state(vm, start(vm, CALLS_B), WFVM_STUCK);
  wfvm_free(vm);
  fake_free(&f);
}

/* ---------------------------------------------------- script failures --- */

static void expect_failed(const char *src, const char *type, const char *needle) {
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_FAILED);
  char t[64];
  snprintf(t, sizeof t, "\"type\":\"%s\"", type);
  assert_contains(wfvm_output(vm), t);
  assert_contains(wfvm_output(vm), needle);
  wfvm_free(vm);
  fake_free(&f);
}

static void test_script_failures(void **state) {
  (void)state;
  expect_failed("return 42\n", "ScriptError", "must return a function(input), got number");
  expect_failed("local x = 1\n", "ScriptError", "got nil");
  expect_failed("return function(\n", "ScriptError", "wf.lua:");
  expect_failed("return function()\n  error('boom')\nend\n", "Error", "wf.lua:2: boom");
  expect_failed("return function()\n  error({type = 'Custom', message = 'mine'})\nend\n", "Custom", "mine");
  expect_failed("return function() return print end\n", "ResultError", "function");

  /* a history that does not begin with WorkflowStarted */
  fake f;
  memset(&f, 0, sizeof f);
  hpush(&f.rec, 1, "ActivityScheduled", 0, "a", "x", NULL, 1);
  wfvm_config cfg = base_cfg();
  wfvm *vm = vm_new(&f, &cfg, &f.rec);
  assert_state(vm, start(vm, CALLS_A), WFVM_FAILED);
  assert_contains(wfvm_output(vm), "WorkflowStarted");
  wfvm_free(vm);
  fake_free(&f);
}

static void test_continue_as_new(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function(input)\n"
      "  pcall(wf.continue_as_new, {n = input.n + 1, tag = 'next'})\n"
      "  return 'not reached'\n"
      "end\n";
  fake f;
  fake_init(&f, "{\"n\":1}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_CONTINUE);
  assert_string_equal(wfvm_output(vm), "{\"n\":2,\"tag\":\"next\"}");
  assert_int_equal(f.appends, 0); /* the engine records ContinuedAsNew */
  wfvm_free(vm);
  fake_free(&f);
}

/* -------------------------------------------------------------- leaks --- */

/* Creating, running and freeing VMs in every end state gives back all memory.
 * (Under ASan, LeakSanitizer checks this for every test; here the heap in use
 * is also compared directly in a plain build.) */
static void one_cycle(void) {
  wfvm_config cfg = base_cfg();
  fake f;
  /* blocked mid-activity, never resumed */
  fake_init(&f, "{\"name\":\"x\"}", SEED);
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, GREET, &st);
  assert_int_equal(st, WFVM_BLOCKED);
  wfvm_free(vm);
  fake_free(&f);
  /* stuck */
  record_a(&f);
  vm = vm_new(&f, &cfg, &f.rec);
  assert_int_equal(start(vm, CALLS_B), WFVM_STUCK);
  wfvm_free(vm);
  fake_free(&f);
  /* killed by the budget */
  cfg.instr_limit = 50000;
  fake_init(&f, "{}", SEED);
  vm = run_live(&f, &cfg, "return function() while true do end end", &st);
  assert_int_equal(st, WFVM_KILLED);
  wfvm_free(vm);
  fake_free(&f);
  /* killed by memory */
  cfg.mem_limit = (size_t)2 << 20;
  cfg.instr_limit = 1000000000;
  fake_init(&f, "{}", SEED);
  vm = run_live(&f, &cfg, MEM_NUMBERS, &st); /* (small objects abort: BUG_memory_limit_...) */
  assert_int_equal(st, WFVM_KILLED);
  wfvm_free(vm);
  fake_free(&f);
  /* failed, and never started */
  cfg = base_cfg();
  fake_init(&f, "{}", SEED);
  vm = run_live(&f, &cfg, "return 1", &st);
  assert_int_equal(st, WFVM_FAILED);
  wfvm_free(vm);
  vm = vm_new(&f, &cfg, &f.rec);
  wfvm_free(vm);
  fake_free(&f);
}

static void test_free_releases_everything(void **state) {
  (void)state;
  wfvm_free(NULL); /* allowed */
  one_cycle();     /* warm up (one-time allocations of libraries) */
  struct mallinfo2 before = mallinfo2();
  for (int i = 0; i < 20; i++) one_cycle();
  struct mallinfo2 after = mallinfo2();
  /* one leaked Lua state alone is tens of KiB; 20 cycles x 6 VMs would show */
  long grown = (long)after.uordblks - (long)before.uordblks;
  if (grown > 64 * 1024) fail_msg("heap in use grew by %ld bytes over 20 cycles", grown);
}

/* ------------------------------------------------------------- limits --- */

/* wf.acquire, wf.release, wf.counter and wf.rate are blocking commands with
 * their arguments in canonical JSON (defaults filled in), and their outcomes
 * come back as values; a replay returns the same without the engine. */
static void test_limits_commands(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local a = wf.acquire('sandboxes')\n"
      "  local d, why = wf.acquire('pr', {key = 'o/r#1', limit = 2, strategy = 'drop'})\n"
      "  local n = wf.counter('tokens', 12.5)\n"
      "  local w = wf.rate('requests', {limit = 60, per = 60})\n"
      "  local c = wf.rate('tokens', {per = 60, charge = 300, pause = 1.5})\n"
      "  local r = wf.release('sandboxes')\n"
      "  return {a = a, d = d == nil and 'nil' or d, why = why, n = n, w = w, c = c, r = r}\n"
      "end\n";
  static const struct { const char *kind, *name, *payload, *outcome, *value; } steps[] = {
      {"slot", "sandboxes", "{\"key\":\"\",\"limit\":1,\"pool\":\"sandboxes\",\"strategy\":\"queue\"}", "SlotGranted",
       "true"},
      {"slot", "pr", "{\"key\":\"o/r#1\",\"limit\":2,\"pool\":\"pr\",\"strategy\":\"drop\"}", "SlotDropped",
       "{\"held\":2,\"limit\":2}"},
      {"counter", "tokens", "{\"delta\":12.5}", "CounterUpdated", "112.5"},
      {"rate", "requests", "{\"cost\":1,\"limit\":60,\"per_ms\":60000}", "RateGranted", "0.25"},
      {"ratecharge", "tokens", "{\"charge\":300,\"pause_ms\":1500,\"per_ms\":60000}", "RateCharged", "true"},
      {"release", "sandboxes", "{\"key\":\"\",\"pool\":\"sandboxes\"}", "SlotReleased", "true"},
  };
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
    assert_state(vm, st, WFVM_BLOCKED);
    assert_string_equal(wfvm_blocked(vm)->kind, steps[i].kind);
    assert_string_equal(wfvm_blocked(vm)->name, steps[i].name);
    assert_string_equal(wfvm_blocked(vm)->payload, steps[i].payload);
    assert_true(wfvm_blocked(vm)->is_new);
    st = deliver(&f, vm, steps[i].outcome, steps[i].value);
  }
  assert_state(vm, st, WFVM_DONE);
  const char *want = "{\"a\":true,\"c\":true,\"d\":\"nil\",\"n\":112.5,\"r\":true,\"w\":0.25,\"why\":\"dropped\"}";
  assert_string_equal(wfvm_output(vm), want);
  wfvm_free(vm);
  fake g;
  vm = replay_as(&g, &cfg, &f.rec, src, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), want);
  wfvm_free(vm);
  fake_free(&f);
}

/* expr, run in a pcall by a fresh workflow, raises an error with message and
 * records nothing. */
static void assert_refused(const char *expr, const char *message) {
  char *src = util_fmt("local wf = require 'workflow'\n"
                       "return function()\n"
                       "  local ok, e = pcall(function() return %s end)\n"
                       "  return {ok = ok, e = tostring(e), n = wf.info().history_length}\n"
                       "end\n",
                       expr);
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_DONE);
  const char *out = wfvm_output(vm);
  if (!strstr(out, "\"ok\":false") || !strstr(out, message) || !strstr(out, "\"n\":1"))
    fail_msg("%s: got %s, wanted an error with \"%s\" and nothing recorded", expr, out, message);
  wfvm_free(vm);
  fake_free(&f);
  free(src);
}

/* ------------------------------------------------------------- futures --- */

/* Appends the outcome of the pending command at seq (as the engine does) and delivers it. */
static wfvm_state deliver_to(fake *f, wfvm *vm, int64_t seq, const char *type, const char *payload) {
  hpush(&f->rec, next_seq(f), type, seq, NULL, NULL, payload, stamp(f));
  hist_event ev = f->rec.v[f->rec.n - 1];
  return wfvm_deliver(vm, &ev);
}

/* A fresh VM over the whole recorded history: the same state and output, nothing appended. */
static void assert_replays(fake *f, const char *src, wfvm_state want, const char *output) {
  wfvm_config cfg = base_cfg();
  int before = f->appends;
  wfvm *vm = vm_new(f, &cfg, &f->rec);
  wfvm_state st = start(vm, src);
  assert_state(vm, st, want);
  if (output) assert_string_equal(wfvm_output(vm), output);
  assert_int_equal(f->appends, before);
  wfvm_free(vm);
}

static const char *FAN_OUT =
    "local wf = require 'workflow'\n"
    "return function(input)\n"
    "  local a = wf.start_activity('a', {n = 1})\n"
    "  local b = wf.start_activity('b', {n = 2})\n"
    "  local t = wf.start_timer(5)\n"
    "  local r = wf.all({a, b})\n"
    "  local first = wf.now()\n"
    "  t:wait()\n"
    "  return {r[1], r[2], #r, a:ready(), wf.info().history_length, first < wf.now()}\n"
    "end\n";

/* Futures issue their commands at once and settle in the order outcomes come;
 * wf.all returns in list order; replay from the log is exact. */
static void test_futures_all(void **state) {
  (void)state;
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, FAN_OUT, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_int_equal(wfvm_pending_count(vm), 3);
  const wfvm_cmd *c = wfvm_next_command(vm);
  assert_string_equal(c->kind, "activity");
  assert_string_equal(c->name, "a");
  assert_int_equal(c->seq, 2);
  assert_true(c->is_new);
  c = wfvm_next_command(vm);
  assert_string_equal(c->name, "b");
  c = wfvm_next_command(vm);
  assert_string_equal(c->kind, "timer");
  assert_int_equal(c->seq, 4);
  assert_null(wfvm_next_command(vm)); /* each once */
  /* b first: nothing wakes, a still pending */
  st = deliver_to(&f, vm, 3, "ActivityCompleted", "\"B\"");
  assert_state(vm, st, WFVM_BLOCKED);
  assert_int_equal(wfvm_pending_count(vm), 2);
  assert_false(wfvm_waits_on(vm, 3));
  assert_true(wfvm_waits_on(vm, 2));
  /* an outcome of no pending command changes nothing */
  hist_event stray = {99, "ActivityCompleted", 3, NULL, NULL, "\"X\"", 0, NULL};
  assert_state(vm, wfvm_deliver(vm, &stray), WFVM_BLOCKED);
  st = deliver_to(&f, vm, 2, "ActivityCompleted", "\"A\"");
  assert_state(vm, st, WFVM_BLOCKED); /* now on the timer */
  assert_int_equal(wfvm_pending_count(vm), 1);
  assert_string_equal(wfvm_blocked(vm)->kind, "timer");
  st = deliver_to(&f, vm, 4, "TimerFired", NULL);
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "[\"A\",\"B\",2,true,7,true]");
  assert_int_equal(f.appends, 3);
  wfvm_free(vm);
  assert_replays(&f, FAN_OUT, WFVM_DONE, "[\"A\",\"B\",2,true,7,true]");

  /* a replay of the log up to b's outcome: blocked on a and the timer, nothing new */
  hist_list part = {0};
  for (size_t i = 0; i < 5; i++) {
    const hist_event *e = &f.rec.v[i];
    hpush(&part, e->seq, e->type, e->ref, e->name, e->hash, e->payload, e->time);
  }
  vm = vm_new(&f, &cfg, &part);
  hist_list_free(&part);
  st = start(vm, FAN_OUT);
  assert_state(vm, st, WFVM_BLOCKED);
  assert_int_equal(wfvm_pending_count(vm), 2);
  assert_int_equal(wfvm_pending_at(vm, 0)->seq, 2);
  assert_false(wfvm_pending_at(vm, 0)->is_new);
  assert_int_equal(wfvm_pending_at(vm, 1)->seq, 4);
  wfvm_free(vm);
  fake_free(&f);
}

static const char *ANY_ERR =
    "local wf = require 'workflow'\n"
    "return function(input)\n"
    "  local a = wf.start_activity('a')\n"
    "  local s = wf.start_wait_signal('go', {timeout = 60})\n"
    "  local i, v = wf.any({a, s})\n"
    "  local ok, e = pcall(wf.all, {a, s})\n"
    "  return {i = i, v = v, ok = ok, e = e.type .. ':' .. e.message}\n"
    "end\n";

/* wf.any: the index and values of the first to settle; wf.all raises the
 * first error in list order, once all have settled. */
static void test_futures_any_and_errors(void **state) {
  (void)state;
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, ANY_ERR, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver_to(&f, vm, 3, "SignalReceived", "{\"x\":1}");
  assert_state(vm, st, WFVM_BLOCKED); /* any returned 2; all waits on a */
  assert_int_equal(wfvm_pending_count(vm), 1);
  st = deliver_to(&f, vm, 2, "ActivityFailed", "{\"type\":\"Boom\",\"message\":\"no\"}");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"e\":\"Boom:no\",\"i\":2,\"ok\":false,\"v\":{\"x\":1}}");
  wfvm_free(vm);
  assert_replays(&f, ANY_ERR, WFVM_DONE, "{\"e\":\"Boom:no\",\"i\":2,\"ok\":false,\"v\":{\"x\":1}}");
  fake_free(&f);
}

static const char *SPAWN =
    "local wf = require 'workflow'\n"
    "local function worker(name, n)\n"
    "  local out = {}\n"
    "  for i = 1, n do out[i] = wf.activity(name, {i = i}) end\n"
    "  return table.concat(out, ','), name\n"
    "end\n"
    "return function(input)\n"
    "  local x = wf.spawn(worker, 'x', 2)\n"
    "  local y = wf.spawn(worker, 'y', 1)\n"
    "  local bad = wf.spawn(function() error({type = 'Bad', message = 'inside'}) end)\n"
    "  local r = wf.all({x, y})\n"
    "  local s, name = x:wait()\n"
    "  local ok, e = pcall(bad.wait, bad)\n"
    "  return {r[1], r[2], s, name, ok, e.type}\n"
    "end\n";

/* wf.spawn: durable coroutines run when the caller waits, first spawned
 * first; their commands interleave the same way on replay. */
static void test_futures_spawn(void **state) {
  (void)state;
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, SPAWN, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  /* x's first and y's only activity, in spawn order */
  assert_int_equal(wfvm_pending_count(vm), 2);
  assert_string_equal(wfvm_pending_at(vm, 0)->name, "x");
  assert_string_equal(wfvm_pending_at(vm, 1)->name, "y");
  st = deliver_to(&f, vm, 3, "ActivityCompleted", "\"y1\"");
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver_to(&f, vm, 2, "ActivityCompleted", "\"x1\"");
  assert_state(vm, st, WFVM_BLOCKED); /* x issued its second */
  assert_int_equal(wfvm_pending_count(vm), 1);
  assert_int_equal(wfvm_blocked(vm)->seq, 6);
  st = deliver_to(&f, vm, 6, "ActivityCompleted", "\"x2\"");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "[\"x1,x2\",\"y1\",\"x1,x2\",\"x\",false,\"Bad\"]");
  wfvm_free(vm);
  assert_replays(&f, SPAWN, WFVM_DONE, "[\"x1,x2\",\"y1\",\"x1,x2\",\"x\",false,\"Bad\"]");
  fake_free(&f);
}

/* Cancelling settles every pending future with Cancelled; the script can
 * clean up after it. */
static void test_futures_cancel(void **state) {
  (void)state;
  const char *src = "local wf = require 'workflow'\n"
                    "return function(input)\n"
                    "  local a, b = wf.start_activity('a'), wf.start_timer(60)\n"
                    "  local ok, e = pcall(wf.all, {a, b})\n"
                    "  local ok2, e2 = pcall(b.wait, b)\n"
                    "  return {ok, e.type, ok2, e2.type}\n"
                    "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver_to(&f, vm, 2, "CommandCancelled", NULL);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver_to(&f, vm, 3, "CommandCancelled", NULL);
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "[false,\"Cancelled\",false,\"Cancelled\"]");
  wfvm_free(vm);
  fake_free(&f);
}

/* What cannot work is refused with a message naming it; a script changed
 * under its log goes stuck naming the event; coroutines that only wait on
 * each other fail as a deadlock. */
static void test_futures_misuse(void **state) {
  (void)state;
  static const struct { const char *body, *message; } bad[] = {
      {"wf.all({1})", "wf.all: item 1 is a number, not a future"},
      {"wf.any({})", "wf.any: the list of futures is empty"},
      {"wf.all(7)", "bad argument #1"},
      {"wf.spawn(3)", "bad argument #1"},
      {"wf.checkpoint('c', function() return wf.start_timer(1) end)", "wf.start_timer cannot be called inside a checkpoint"},
      {"coroutine.wrap(function() return wf.start_activity('a') end)()", "not from a coroutine the script created"},
      {"coroutine.wrap(function() return wf.spawn(print) end)()", "not from a coroutine the script created"},
      {"getmetatable(wf.spawn(function() end)).__index.wait", "attempt to index a nil value"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_refused(bad[i].body, bad[i].message);

  /* a deadlock: the only other coroutine waits on the one waiting for it */
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg,
                      "local wf = require 'workflow'\n"
                      "return function()\n"
                      "  local me\n"
                      "  local other = wf.spawn(function() return me:wait() end)\n"
                      "  me = wf.spawn(function() return other:wait() end)\n"
                      "  return other:wait()\n"
                      "end\n",
                      &st);
  assert_state(vm, st, WFVM_FAILED);
  assert_contains(wfvm_output(vm), "DeadlockError");
  wfvm_free(vm);
  fake_free(&f);

  /* replayed with one future fewer: stuck at the command the log has */
  fake_init(&f, "{}", SEED);
  vm = run_live(&f, &cfg, FAN_OUT, &st);
  wfvm_free(vm);
  const char *fewer = "local wf = require 'workflow'\n"
                      "return function(input)\n"
                      "  local a = wf.start_activity('a', {n = 1})\n"
                      "  return a:wait()\n"
                      "end\n";
  vm = vm_new(&f, &cfg, &f.rec);
  st = start(vm, fewer);
  assert_state(vm, st, WFVM_STUCK);
  assert_contains(wfvm_output(vm), "non-determinism at event #3: history has ActivityScheduled 'b' but the script waits (at wf.lua:4)");
  wfvm_free(vm);
  fake_free(&f);
}

/* Bad arguments are refused before anything is recorded, naming the field. */
static void test_limits_bad_arguments(void **state) {
  (void)state;
  static const struct { const char *call, *message; } bad[] = {
      {"wf.acquire('p', {limit = 0})", "'limit' must be a whole number from 1 to 1000000"},
      {"wf.acquire('p', {limit = 1.5})", "'limit' must be a whole number"},
      {"wf.acquire('p', {limit = '2'})", "'limit' must be a whole number"},
      {"wf.acquire('p', {strategy = 'lifo'})", "'strategy' must be queue, cancel_in_progress or drop"},
      {"wf.acquire('p', {key = 7})", "'key' must be a string"},
      {"wf.acquire('p', {key = string.rep('k', 257)})", "'key' must be at most 256 bytes"},
      {"wf.acquire('p', {key = 'a\\0b'})", "without NUL"},
      {"wf.acquire('')", "the pool name must be 1-128 bytes"},
      {"wf.counter('c', 0/0)", "delta must be a finite number"},
      {"wf.counter('c', math.huge)", "delta must be a finite number"},
      {"wf.rate('r', {limit = 0})", "'limit' must be a number from 1"},
      {"wf.rate('r', {per = 0})", "'per' must be a number from 0.001"},
      {"wf.rate('r', {per = 1, charge = -1})", "'charge' must be a number from 0"},
      {"wf.rate('r', {per = 1, charge = 1, pause = 1/0})", "'pause' must be a number"},
      {"wf.rate('r')", "bad argument #2"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) assert_refused(bad[i].call, bad[i].message);
}

/* ----------------------------------------------------------- known bugs --- */

/* wf.now() must give the same value live and on replay (design: "deterministic
 * replacements (workflow.now() ...) come from the log").
 *
 * BUG (engine/vm/wfvm.c, append and l_patched): after a live non-blocking command
 * (checkpoint, emit, patched) the VM sets now_ms = util_now_ms() *after*
 * host.append returned, while the log holds the time the host stamped on the
 * event (engine.c run_append stamps util_now_ms() before the SQLite insert). On
 * replay expect() sets now_ms from the event's time, and l_patched does not set
 * it at all. Whenever the clock ticks between the two readings (any slow append,
 * here 5 ms) the script sees a different wf.now() on replay: a value passed to
 * an activity then changes its argument hash and the run goes stuck. Fix: let
 * host.append report the time it recorded (or pass the VM's time to the host),
 * and set now_ms from the marker in l_patched. */
static void BUG_now_after_checkpoint_differs_on_replay(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  wf.checkpoint('c', function() return 1 end)\n"
      "  local t1 = wf.now()\n"
      "  wf.emit('e', {})\n"
      "  local t2 = wf.now()\n"
      "  wf.patched('p')\n"
      "  local t3 = wf.now()\n"
      "  return {t1 = t1, t2 = t2, t3 = t3}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  f.real_clock = 1;
  f.append_ms = 5;
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_DONE);
  char live[256];
  snprintf(live, sizeof live, "%s", wfvm_output(vm));
  wfvm_free(vm);
  fake g;
  vm = replay_as(&g, &cfg, &f.rec, src, WFVM_DONE);
  char replay[256];
  snprintf(replay, sizeof replay, "%s", wfvm_output(vm));
  wfvm_free(vm);
  fake_free(&f);
  assert_string_equal(replay, live);
}

/* Asking whether the run replays must not change how it replays.
 *
 * BUG (engine/vm/wfvm_internal.h, live): live() asked peek(), which skips the
 * patch markers at the cursor (those of a removed wf.patched() call) by moving
 * the cursor past them; a wf.info() or wf.is_replaying() right before a
 * wf.patched() so consumed its marker, and on replay wf.patched() answered
 * false: the old branch, and the run stuck (an agent session continued as new
 * that named itself in its span with wf.info() before wf.patched("parallel-
 * tool-calls"); test_compaction, under load, in CI). Fix: live() looks past
 * the markers without moving the cursor. */
static void BUG_info_before_patched_takes_the_old_branch(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local replaying = wf.is_replaying() or wf.info().replaying\n"
      "  if wf.patched('new-step') then return {branch = 'new', r = wf.activity('b')} end\n"
      "  return {branch = 'old', r = wf.activity('a', {n = 1})}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "ActivityCompleted", "1");
  assert_state(vm, st, WFVM_DONE);
  wfvm_free(vm);
  fake g;
  vm = replayed(&g, &cfg, &f.rec, src);
  assert_string_equal(wfvm_output(vm), "{\"branch\":\"new\",\"r\":1}");
  wfvm_free(vm);
  fake_free(&f);
}

/* A wait computed from a deadline (timeout = deadline - wf.now()) must not end
 * before the deadline, or the script wakes with time still left and carries on.
 *
 * BUG (engine/vm/wfvm.c, l_sleep/l_wait_signal): the due time was now +
 * (int64_t)(seconds * 1000), truncated, so 0.0004 s became 0 ms and a 2.9999 s
 * remainder fired a millisecond early; the agent session's timeoutSeconds then
 * saw 1 ms left after its approval wait, asked the model once more and finished
 * without limit.exceeded (failed once in CI). Fix: round the due time up. */
static void BUG_timeout_rounds_down_to_early_fire(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  wf.wait_signal('x', {timeout = 0.0004})\n"
      "end\n";
  for (int tries = 0; tries < 50; tries++) {
    fake f;
    fake_init(&f, "{}", SEED);
    wfvm_config cfg = base_cfg();
    wfvm_state st;
    int64_t before = util_now_ms();
    wfvm *vm = run_live(&f, &cfg, src, &st);
    int64_t after = util_now_ms();
    assert_state(vm, st, WFVM_BLOCKED);
    const char *d = strstr(wfvm_blocked(vm)->payload, "\"deadline\":");
    assert_non_null(d);
    long long deadline = atoll(d + 11);
    wfvm_free(vm);
    fake_free(&f);
    if (before != after) continue; /* the clock ticked during the call: no exact bound */
    assert_int_equal(deadline, before + 1);
    return;
  }
  fail_msg("the clock ticked during every one of 50 calls");
}

/* A primitive that cannot block where it is called (inside a table.sort
 * comparator, a string.gsub callback, a __tostring called by tostring, ...) must
 * fail without touching the history.
 *
 * BUG (engine/vm/wfvm.c, block_on/check_primitive): check_primitive only checks
 * that L is the workflow coroutine, not lua_isyieldable(L); block_on appends the
 * ActivityScheduled (or TimerStarted / SignalWaitStarted) event through the host
 * and only then calls lua_yieldk, which raises "attempt to yield across a C-call
 * boundary". The error is catchable, the run carries on, and its history holds a
 * command the engine never performs. Fix: refuse in check_primitive when
 * !lua_isyieldable(L), before anything is appended. */
static void BUG_unyieldable_primitive_appends_orphan_command(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local ok, e = pcall(table.sort, {2, 1}, function(a, b) wf.activity('x') return a < b end)\n"
      "  local ok2 = pcall(string.gsub, 'a', 'a', function() wf.sleep(1) end)\n"
      "  return {ok = ok, ok2 = ok2}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  char out[512];
  snprintf(out, sizeof out, "%s", wfvm_output(vm));
  int appends = f.appends;
  wfvm_free(vm);
  fake_free(&f);
  assert_int_equal(st, WFVM_DONE);
  assert_string_equal(out, "{\"ok\":false,\"ok2\":false}");
  if (appends != 0) fail_msg("%d command(s) appended to the history although the script never blocked", appends);
}

/* print(a, b) in a live workflow hands the host the arguments joined by tabs.
 *
 * BUG (engine/vm/wfvm.c, l_print): n = lua_gettop(L) is read *after*
 * luaL_buffinit, which in Lua 5.4 pushes a placeholder onto the stack, so the
 * loop also prints the placeholder: print('hello', 42) comes out as
 * "hello\t42\tuserdata: 0x7ffc...". Fix: take lua_gettop before luaL_buffinit. */
static void BUG_print_adds_buffer_placeholder(void **state) {
  (void)state;
  const char *src = "return function() print('hello', 42) print() print(nil, true) end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  char prints[512];
  snprintf(prints, sizeof prints, "%s", f.prints);
  wfvm_free(vm);
  fake_free(&f);
  assert_int_equal(st, WFVM_DONE);
  assert_string_equal(prints, "hello\t42||nil\ttrue|");
}

/* What the run's own generator gave for SEED before issue 9 (golden). */
#define GOLDEN_RNG "[855068,\"de586a31-41a1-4922-821f-bc2f8e1cfc1d\",0.45469370192939129,5]"

/* ------------------------------------------------- hardening (issue 9) --- */

/* Runs src live to its end in a child; the child's exit code is the state. */
static void expect_child_state(const char *src, wfvm_state want, const char *needle) {
  wfvm_config cfg = base_cfg();
  char out[2048];
  int status = run_in_child(&cfg, src, out, sizeof out);
  if (WIFSIGNALED(status))
    fail_msg("the VM process died with signal %d (%s)\n%s", WTERMSIG(status), strsignal(WTERMSIG(status)), src);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != (int)want)
    fail_msg("state %s, expected %s; output %s\n%s", state_name((wfvm_state)WEXITSTATUS(status)), state_name(want),
             out, src);
  assert_contains(out, needle);
}

/* An error value whose metatable raises (the "strict class" idiom), loops, or
 * lies must fail the one workflow with a clear error.
 *
 * BUG (engine/vm/wfvm.c, error_json): the error was read with lua_getfield on the
 * dead coroutine, outside any protected call: __index ran there, its error had
 * no handler, Lua's panic function ran and abort()ed the engine (every
 * workflow with it, and again at each restart). Fix: read the error raw, under
 * a protected call at the VM boundary. */
static void BUG_error_object_with_raising_metatable_aborts(void **state) {
  (void)state;
  expect_child_state("return function()\n"
                     "  error(setmetatable({}, {__index = function(_, k) error('no field ' .. k) end}))\n"
                     "end\n",
                     WFVM_FAILED, "\"type\":\"Error\"");
  expect_child_state("return function()\n"
                     "  error(setmetatable({}, {__index = function(_, k) error('no field ' .. k) end}))\n"
                     "end\n",
                     WFVM_FAILED, "without a 'message' string");
  /* raw fields are used; metamethods never run outside the script's budget */
  expect_child_state("return function()\n"
                     "  error(setmetatable({type = 'Strict', message = 'raw fields'},\n"
                     "    {__index = function() while true do end end, __tostring = function() error('no') end,\n"
                     "     __eq = function() error('no') end, __name = 'Strict'}))\n"
                     "end\n",
                     WFVM_FAILED, "\"message\":\"raw fields\"");
  expect_child_state("return function()\n"
                     "  error(setmetatable({}, {__index = function() while true do end end}))\n"
                     "end\n",
                     WFVM_FAILED, "\"type\":\"Error\"");
  /* caught and re-raised by the script, after an activity failure: the same */
  expect_child_state("local wf = require 'workflow'\n"
                     "return function()\n"
                     "  local e = setmetatable({}, {__index = function(_, k) error('strict: ' .. k) end})\n"
                     "  local ok = pcall(error, e)\n"
                     "  error(e)\n"
                     "end\n",
                     WFVM_FAILED, "\"stack\":");
}

/* The instruction budget is per wake-up; replaying a run that never exceeded
 * it must not exceed it either.
 *
 * BUG (engine/vm/wfvm.c, resume): the count was reset once per lua_resume, and a
 * replay is one resume over every wake-up in the history: a run whose wake-ups
 * each stayed under the budget was killed on its first replay, durably. Fix:
 * restart the count wherever the live run was woken (each outcome a replay
 * consumes). Replay stays bounded: at most one budget per recorded outcome. */
static void BUG_budget_counts_the_replayed_prefix(void **state) {
  (void)state;
  wfvm_config cfg = base_cfg();
  cfg.instr_limit = 300000;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local x = 0\n"
      "  for round = 1, 4 do\n"
      "    for i = 1, 60000 do x = x + i end\n"
      "    for i = 1, 60000 do x = x + i end\n"
      "    wf.activity('a', {round = round})\n"
      "  end\n"
      "  for i = 1, 60000 do x = x + i end\n"
      "  return x\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  for (int i = 0; i < 4; i++) {
    assert_state(vm, st, WFVM_BLOCKED);
    st = deliver(&f, vm, "ActivityCompleted", "null");
  }
  assert_state(vm, st, WFVM_DONE);
  char live[64];
  snprintf(live, sizeof live, "%s", wfvm_output(vm));
  wfvm_free(vm);
  /* the whole history, replayed in one resume */
  fake g;
  vm = replay_as(&g, &cfg, &f.rec, src, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), live);
  wfvm_free(vm);
  /* a script that loops only while replaying is still stopped */
  const char *replay_loop =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  for round = 1, 4 do\n"
      "    if wf.is_replaying() then while true do end end\n"
      "    wf.activity('a', {round = round})\n"
      "  end\n"
      "  return 1\n"
      "end\n";
  vm = replay_as(&g, &cfg, &f.rec, replay_loop, WFVM_KILLED);
  assert_contains(wfvm_output(vm), "instruction budget");
  wfvm_free(vm);
  fake_free(&f);
}

/* Runs src live in-process and copies its output (which must be DONE). */
static void run_done(const char *src, char *out, size_t n) {
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_DONE);
  snprintf(out, n, "%s", wfvm_output(vm));
  wfvm_free(vm);
  fake_free(&f);
}

/* BUG (engine/vm/wfvm.c, build_sandbox): tostring, print and string.format('%s')
 * showed tables, functions and coroutines by address, and '%p' printed the
 * address itself; addresses differ between the live run and its replay (the
 * agent session built an approval id from tostring(update) and waited on
 * another signal after a restart). Fix: no addresses in the sandbox. */
static void BUG_tostring_shows_addresses(void **state) {
  (void)state;
  char out[1024];
  run_done("return function()\n"
           "  local p_ok, p_err = pcall(string.format, '%p', {})\n"
           "  print({}, print)\n"
           "  return {t = tostring({}), f = tostring(print), g = tostring(function() end),\n"
           "    co = tostring(coroutine.create(function() end)), fmt = string.format('%s|%5s|%-3s.', {}, print, 1),\n"
           "    m = ('%s'):format({}), p_ok = p_ok, p_err = tostring(p_err):match(\"'%%p'.*\"),\n"
           "    named = tostring(setmetatable({}, {__name = 'Thing'})),\n"
           "    custom = tostring(setmetatable({}, {__tostring = function() return 'custom' end})),\n"
           "    n = tostring(1.5) .. tostring(nil) .. tostring(true) .. tostring(-0.0), pct = string.format('%d%%', 5)}\n"
           "end\n",
           out, sizeof out);
  if (strstr(out, "0x")) fail_msg("an address leaked: %s", out);
  assert_contains(out, "\"t\":\"table\"");
  assert_contains(out, "\"f\":\"function\"");
  assert_contains(out, "\"g\":\"function\"");
  assert_contains(out, "\"co\":\"thread\"");
  assert_contains(out, "\"fmt\":\"table|function|1  .\"");
  assert_contains(out, "\"m\":\"table\"");
  assert_contains(out, "\"p_ok\":false");
  assert_contains(out, "\"p_err\":\"'%p' is not available to workflows");
  assert_contains(out, "\"named\":\"Thing\"");
  assert_contains(out, "\"custom\":\"custom\"");
  assert_contains(out, "\"n\":\"1.5niltrue-0.0\"");
  assert_contains(out, "\"pct\":\"5%\"");
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, "return function() print({}, print, 'x') end\n", &st);
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(f.prints, "table\tfunction\tx|");
  wfvm_free(vm);
  fake_free(&f);
}

/* BUG (engine/vm/wfvm.c, l_pairs): keys that are tables, functions or coroutines
 * were visited in raw next() order, which follows addresses. Fix: one such key
 * has a fixed place (last); two or more are refused, naming the problem. */
static void BUG_pairs_orders_table_keys_by_address(void **state) {
  (void)state;
  char out[512];
  run_done("return function()\n"
           "  local two = {[{}] = 1, [function() end] = 2, a = 3}\n"
           "  local ok, e = pcall(function() for k in pairs(two) do end end)\n"
           "  local one, seen = {[{}] = 1, b = 2, [1] = 3}, {}\n"
           "  for k in pairs(one) do seen[#seen + 1] = type(k) end\n"
           "  return {ok = ok, e = tostring(e):match('pairs: .*'), seen = table.concat(seen, ',')}\n"
           "end\n",
           out, sizeof out);
  assert_contains(out, "\"ok\":false");
  assert_contains(out, "\"e\":\"pairs: the table has 2 keys that are tables, functions or coroutines");
  assert_contains(out, "\"seen\":\"number,string,table\"");
}

/* BUG (engine/vm/wfvm.c, build_sandbox): collectgarbage('count') gave the VM's
 * memory use, which differs between a live run and its replay. Fix: refused
 * like every other collectgarbage option. */
static void BUG_collectgarbage_count_allowed(void **state) {
  (void)state;
  char out[512];
  run_done("return function()\n"
           "  local ok, e = pcall(collectgarbage, 'count')\n"
           "  return {ok = ok, e = tostring(e):match('collectgarbage.*')}\n"
           "end\n",
           out, sizeof out);
  assert_contains(out, "\"ok\":false");
  assert_contains(out, "\"e\":\"collectgarbage('count') is not available to workflows");
}

/* BUG (engine/vm/wfvm.c, build_sandbox): __gc finalizers and weak tables (__mode)
 * act when the garbage collector runs, which differs between a live run and
 * its replay, and a finalizer ran on the engine's main thread with no
 * instruction budget (a looping one hung the engine). Fix: setmetatable in
 * the sandbox refuses both, naming the field. */
static void BUG_setmetatable_allows_gc_and_mode(void **state) {
  (void)state;
  char out[1024];
  run_done("return function()\n"
           "  local g_ok, g_e = pcall(setmetatable, {}, {__gc = function() end})\n"
           "  local m_ok, m_e = pcall(setmetatable, {}, {__mode = 'k'})\n"
           "  local t = setmetatable({}, {__index = function(_, k) return k .. '!' end})\n"
           "  local locked = setmetatable({}, {__metatable = 'locked'})\n"
           "  local l_ok, l_e = pcall(setmetatable, locked, {})\n"
           "  local n_ok = pcall(setmetatable, 1, {})\n"
           "  return {g_ok = g_ok, g_e = tostring(g_e):match('__gc.*'), m_ok = m_ok, m_e = tostring(m_e):match('__mode.*'),\n"
           "    idx = t.x, l_ok = l_ok, l_e = tostring(l_e):match('protected'), mt = getmetatable(locked), n_ok = n_ok,\n"
           "    cleared = getmetatable(setmetatable(t, nil)) == nil}\n"
           "end\n",
           out, sizeof out);
  assert_contains(out, "\"g_ok\":false");
  assert_contains(out, "\"g_e\":\"__gc (a finalizer) is not available to workflows");
  assert_contains(out, "\"m_ok\":false");
  assert_contains(out, "\"m_e\":\"__mode (a weak table) is not available to workflows");
  assert_contains(out, "\"idx\":\"x!\"");
  assert_contains(out, "\"l_ok\":false");
  assert_contains(out, "\"l_e\":\"protected\"");
  assert_contains(out, "\"mt\":\"locked\"");
  assert_contains(out, "\"n_ok\":false");
  assert_contains(out, "\"cleared\":true");
}

/* BUG (engine/vm/wfvm.c, resume): coroutine.yield() in the workflow body (not in
 * a coroutine the script made) looked like a primitive's yield: the engine
 * re-ran the previous command or waited on a signal named "(null)". Fix: a
 * bare yield is an error at the call; the script's own coroutines work as in
 * Lua. */
static void BUG_bare_yield_blocks_on_nothing(void **state) {
  (void)state;
  expect_child_state("return function() coroutine.yield('x') return 1 end\n", WFVM_FAILED,
                     "coroutine.yield outside a coroutine the workflow created");
  char out[1024];
  run_done("local wf = require 'workflow'\n"
           "return function()\n"
           "  local ok, e = pcall(coroutine.yield, 1)\n"
           "  local gen = coroutine.wrap(function(a) local b = coroutine.yield(a + 1); return b * 2 end)\n"
           "  local first, second = gen(1), gen(10)\n"
           "  local co = coroutine.create(function() for i = 1, 3 do coroutine.yield(i) end return 'end' end)\n"
           "  local got = {}\n"
           "  while coroutine.status(co) ~= 'dead' do local _, v = coroutine.resume(co); got[#got + 1] = v end\n"
           "  local inner = coroutine.wrap(function() return coroutine.isyieldable() end)()\n"
           "  local prim_ok = pcall(coroutine.wrap(function() return wf.activity('x') end))\n"
           "  return {ok = ok, e = tostring(e):match('coroutine.yield outside') or tostring(e), first = first,\n"
           "    second = second, got = table.concat(got, ','), main = coroutine.isyieldable(), inner = inner,\n"
           "    prim_ok = prim_ok}\n"
           "end\n",
           out, sizeof out);
  assert_string_equal(out, "{\"e\":\"coroutine.yield outside\",\"first\":2,\"got\":\"1,2,3,end\",\"inner\":true,"
                           "\"main\":false,\"ok\":false,\"prim_ok\":false,\"second\":20}");
}

/* Replays src over f's history in a fresh VM and copies the output. */
static void replay_done(const fake *f, const char *src, char *out, size_t n) {
  fake g;
  memset(&g, 0, sizeof g);
  wfvm_config cfg = base_cfg();
  wfvm *vm = vm_new(&g, &cfg, &f->rec);
  wfvm_state st = start(vm, src);
  assert_state(vm, st, WFVM_DONE);
  assert_int_equal(g.appends, 0);
  snprintf(out, n, "%s", wfvm_output(vm));
  wfvm_free(vm);
}

/* BUG (engine/vm/wfvm.c, l_info): wf.info().history_length was the length of
 * the history loaded into the VM: 1 for a run that went live at once, the
 * whole history on a replay. Fix: the number of events up to the current
 * point of the script (the seq of the last one it has seen), the same live
 * and on replay. */
static void BUG_history_length_differs_on_replay(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local n = {wf.info().history_length}\n"
      "  wf.activity('x')\n"
      "  n[#n + 1] = wf.info().history_length\n"
      "  wf.emit('e', {})\n"
      "  n[#n + 1] = wf.info().history_length\n"
      "  wf.sleep(1)\n"
      "  n[#n + 1] = wf.info().history_length\n"
      "  return table.concat(n, ',')\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "ActivityCompleted", "null");
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "TimerFired", NULL);
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "\"1,3,4,6\"");
  wfvm_free(vm);
  char out[128];
  replay_done(&f, src, out, sizeof out);
  assert_string_equal(out, "\"1,3,4,6\"");
  fake_free(&f);
}

/* BUG (engine/vm/wfvm.c, build_sandbox): Lua's table.sort is a quicksort that
 * picks a "random" pivot from clock() and time() when a partition is
 * unbalanced, so elements that compare equal come out in an order that can
 * differ between the live run and its replay. Fix: the sandbox's table.sort is
 * a stable merge sort (equal elements keep their order), the same every run. */
static void BUG_table_sort_unstable(void **state) {
  (void)state;
  char out[512];
  run_done("return function()\n"
           "  local t = {}\n"
           "  for i = 1, 400 do t[i] = {k = (i * 7) % 3, id = i} end\n"
           "  table.sort(t, function(a, b) return a.k < b.k end)\n"
           "  local stable = true\n"
           "  for i = 2, #t do\n"
           "    if t[i - 1].k > t[i].k or (t[i - 1].k == t[i].k and t[i - 1].id > t[i].id) then stable = false end\n"
           "  end\n"
           "  local n = {5, 3, 9, 1, 3}\n"
           "  table.sort(n)\n"
           "  local d = {'b', 'c', 'a'}\n"
           "  table.sort(d, function(a, b) return a > b end)\n"
           "  local bad = {3, 1, 2}\n"
           "  table.sort(bad, function() return true end)\n"
           "  local mixed_ok = pcall(table.sort, {1, 'a', 2})\n"
           "  local e = {}\n"
           "  table.sort(e)\n"
           "  return {stable = stable, n = table.concat(n, ','), d = table.concat(d), bad = #bad, mixed_ok = mixed_ok,\n"
           "    e = #e}\n"
           "end\n",
           out, sizeof out);
  assert_string_equal(out, "{\"bad\":3,\"d\":\"cba\",\"e\":0,\"mixed_ok\":false,\"n\":\"1,3,3,5,9\",\"stable\":true}");
}

/* wf.random / wf.uuid drawn inside a checkpoint function must not change the
 * values drawn outside it.
 *
 * BUG (engine/vm/wfvm.c, l_random/l_uuid): draws inside the function advanced the
 * run's generator live, but on replay the function does not run: every later
 * draw differed after a restart (here the activity's arguments, so the run
 * went stuck). Fix: a checkpoint function draws from a stream of its own; the
 * run's stream is the one it always was, so old histories replay unchanged. */
static void BUG_random_in_checkpoint_breaks_replay(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local a = wf.random(1000000000)\n"
      "  local c = wf.checkpoint('c', function() return {wf.random(1000000000), wf.uuid()} end)\n"
      "  local c2 = wf.checkpoint('c2', function() return wf.uuid() end)\n"
      "  local b = wf.uuid()\n"
      "  wf.activity('x', {b = b})\n"
      "  return {a = a, b = b, c = c, c2 = c2, d = wf.random(1000000000)}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "ActivityCompleted", "null");
  assert_state(vm, st, WFVM_DONE);
  char live[512];
  snprintf(live, sizeof live, "%s", wfvm_output(vm));
  wfvm_free(vm);
  char out[512];
  replay_done(&f, src, out, sizeof out);
  assert_string_equal(out, live);
  /* the two checkpoints drew different uuids */
  const char *c2 = strstr(live, "\"c2\":\"");
  assert_non_null(c2);
  char u[37];
  memcpy(u, c2 + 6, 36);
  u[36] = 0;
  const char *first = strstr(live, u);
  if (first != c2 + 6 || strstr(first + 1, u)) fail_msg("uuid %s drawn twice: %s", u, live);
  fake_free(&f);
  /* the run's own stream is unchanged: a run recorded before this fix (these
   * values came from the engine as it was) replays to the same values */
  char golden[512];
  run_done("local wf = require 'workflow'\n"
           "return function() return {wf.random(1000000), wf.uuid(), wf.random(), wf.random(3, 9)} end\n",
           golden, sizeof golden);
  assert_string_equal(golden, GOLDEN_RNG);
}

/* A checkpoint whose function raised records nothing; its replay must not
 * take the next event for a mismatch.
 *
 * BUG (engine/vm/wfvm.c, l_checkpoint): on replay the checkpoint expected its
 * CheckpointRecorded at the next event, found the command that came after the
 * failure instead, and the run went stuck. Fix: when the history does not hold
 * this checkpoint next, the function runs again (as it did live); only if it
 * then returns a value is the run non-deterministic. */
static void BUG_failed_checkpoint_replays_stuck(void **state) {
  (void)state;
  const char *src =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local ok, e = pcall(wf.checkpoint, 'c', function() error('boom') end)\n"
      "  local v = wf.activity('a')\n"
      "  return {ok = ok, e = tostring(e):match('boom'), v = v}\n"
      "end\n";
  fake f;
  fake_init(&f, "{}", SEED);
  wfvm_config cfg = base_cfg();
  wfvm_state st;
  wfvm *vm = run_live(&f, &cfg, src, &st);
  assert_state(vm, st, WFVM_BLOCKED);
  st = deliver(&f, vm, "ActivityCompleted", "7");
  assert_state(vm, st, WFVM_DONE);
  assert_string_equal(wfvm_output(vm), "{\"e\":\"boom\",\"ok\":false,\"v\":7}");
  wfvm_free(vm);
  char out[256];
  replay_done(&f, src, out, sizeof out);
  assert_string_equal(out, "{\"e\":\"boom\",\"ok\":false,\"v\":7}");
  /* a function that raised live but returns on replay is a divergence */
  const char *returns =
      "local wf = require 'workflow'\n"
      "return function()\n"
      "  local ok, e = pcall(wf.checkpoint, 'c', function() return 1 end)\n"
      "  return wf.activity('a')\n"
      "end\n";
  fake g;
  memset(&g, 0, sizeof g);
  vm = vm_new(&g, &cfg, &f.rec);
  assert_state(vm, start(vm, returns), WFVM_STUCK);
  assert_contains(wfvm_output(vm), "CheckpointRecorded 'c'");
  wfvm_free(vm);
  fake_free(&f);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_activity_blocks_then_completes),
      cmocka_unit_test(test_full_replay_no_appends_same_result),
      cmocka_unit_test(test_nondeterminism_is_stuck),
      cmocka_unit_test(test_pcall_cannot_swallow_stuck),
      cmocka_unit_test(test_instruction_budget),
      cmocka_unit_test(test_instruction_budget_is_per_resume),
      cmocka_unit_test(test_memory_limit),
      cmocka_unit_test(test_sandbox),
      cmocka_unit_test(test_now_random_uuid_deterministic),
      cmocka_unit_test(test_pairs_order_identical_across_vms),
      cmocka_unit_test(test_checkpoint_once),
      cmocka_unit_test(test_patched),
      cmocka_unit_test(test_activity_failure_is_catchable_table),
      cmocka_unit_test(test_child_commands),
      cmocka_unit_test(test_fork_prefix_reads_the_source_id),
      cmocka_unit_test(test_sleep_and_signals),
      cmocka_unit_test(test_emit_once),
      cmocka_unit_test(test_span_description),
      cmocka_unit_test(test_info_parent),
      cmocka_unit_test(test_check_only_ends_at_history_end),
      cmocka_unit_test(test_script_failures),
      cmocka_unit_test(test_continue_as_new),
      cmocka_unit_test(test_free_releases_everything),
      cmocka_unit_test(test_limits_commands),
      cmocka_unit_test(test_limits_bad_arguments),
      cmocka_unit_test(test_futures_all),
      cmocka_unit_test(test_futures_any_and_errors),
      cmocka_unit_test(test_futures_spawn),
      cmocka_unit_test(test_futures_cancel),
      cmocka_unit_test(test_futures_misuse),
  };
  /* Known engine defects: each fails until the cause named at the test is fixed. */
  const struct CMUnitTest bugs[] = {
      cmocka_unit_test(BUG_memory_limit_small_objects_aborts),
      cmocka_unit_test(BUG_string_dump_reachable_via_metatable),
      cmocka_unit_test(BUG_print_adds_buffer_placeholder),
      cmocka_unit_test(BUG_now_after_checkpoint_differs_on_replay),
      cmocka_unit_test(BUG_info_before_patched_takes_the_old_branch),
      cmocka_unit_test(BUG_unyieldable_primitive_appends_orphan_command),
      cmocka_unit_test(BUG_timeout_rounds_down_to_early_fire),
      cmocka_unit_test(BUG_error_object_with_raising_metatable_aborts),
      cmocka_unit_test(BUG_budget_counts_the_replayed_prefix),
      cmocka_unit_test(BUG_tostring_shows_addresses),
      cmocka_unit_test(BUG_pairs_orders_table_keys_by_address),
      cmocka_unit_test(BUG_collectgarbage_count_allowed),
      cmocka_unit_test(BUG_setmetatable_allows_gc_and_mode),
      cmocka_unit_test(BUG_bare_yield_blocks_on_nothing),
      cmocka_unit_test(BUG_history_length_differs_on_replay),
      cmocka_unit_test(BUG_table_sort_unstable),
      cmocka_unit_test(BUG_random_in_checkpoint_breaks_replay),
      cmocka_unit_test(BUG_failed_checkpoint_replays_stuck),
  };
  if (argc > 1 && strcmp(argv[1], "bugs") == 0) return cmocka_run_group_tests_name("unit_wfvm_bugs", bugs, NULL, NULL);
  return cmocka_run_group_tests_name("unit_wfvm", tests, NULL, NULL);
}
