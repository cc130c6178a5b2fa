/* Unit tests for engine/util's memory rules: the aborting allocators
 * (util_xmalloc, util_xcalloc, util_xrealloc) and what is built on them
 * (util_fmt, util_strdup, ubuf_add), against ubuf_try_add, which reports.
 *
 * Running out of memory for real happens in a forked child: with RLIMIT_AS
 * lowered (not under AddressSanitizer, whose shadow memory needs terabytes of
 * address space; those cases are skipped there), or with a size no allocator
 * can serve. The child must die of SIGABRT with the message on its stderr,
 * and the crash note (fatal.c) must name the reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fatal.h"
#include "testutil.h"
#include "util.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Under AddressSanitizer an allocation it cannot serve must return NULL, as
 * the C library's does, for the engine's own answer to show. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

#define IMPOSSIBLE ((size_t)1 << 62) /* past any address space */

/* ----------------------------------------------------------- children --- */

typedef struct child_result {
  int status;
  char *err; /* what the child wrote to stderr */
  char note_owner[64], note_id[128], note_what[256];
  int noted;
} child_result;

/* Runs fn(arg, note) in a forked child, stderr into a file; a child that
 * returns exits 0 (it survived). note: a path for fatal_arm. */
static void run_child(void (*fn)(void *arg, const char *note), void *arg, child_result *r) {
  memset(r, 0, sizeof *r);
  char *dir = tu_mkdtemp();
  assert_non_null(dir);
  char *errpath = tu_path(dir, "stderr"), *note = tu_path(dir, "crash-note");
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) _exit(90);
    fn(arg, note);
    _exit(0);
  }
  assert_int_equal(waitpid(pid, &r->status, 0), pid);
  r->err = util_read_file(errpath, NULL);
  r->noted = fatal_read_note(note, r->note_owner, sizeof r->note_owner, r->note_id, sizeof r->note_id,
                             r->note_what, sizeof r->note_what);
  free(errpath);
  free(note);
  tu_rmtree(dir);
}

/* The child died of abort() and said "engine: out of memory (<want>" on a
 * line of its own (want: the size part, or "" for any; AddressSanitizer may
 * print a warning line before it). */
static void expect_oom_abort(child_result *r, const char *want) {
  char err[1024];
  snprintf(err, sizeof err, "%s", r->err ? r->err : "");
  free(r->err);
  r->err = NULL;
  if (WIFEXITED(r->status))
    fail_msg("the child survived (exit %d) instead of aborting; stderr: \"%s\"", WEXITSTATUS(r->status), err);
  if (!WIFSIGNALED(r->status) || WTERMSIG(r->status) != SIGABRT)
    fail_msg("the child died of signal %d, not SIGABRT; stderr: \"%s\"", WTERMSIG(r->status), err);
  char line[160];
  snprintf(line, sizeof line, "engine: out of memory (%s", want);
  const char *at = strstr(err, line);
  if (!at || (at != err && at[-1] != '\n') || !strstr(at, " bytes)\n"))
    fail_msg("stderr is \"%s\", wanted a line starting \"%s\"", err, line);
}

/* Leaves the child 64 MiB of address space above what it uses now. */
static void limit_address_space(void) {
  long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f || fscanf(f, "%ld", &pages) != 1) _exit(91);
  fclose(f);
  rlim_t now = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
  struct rlimit rl = {now + ((rlim_t)64 << 20), now + ((rlim_t)64 << 20)};
  if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(92);
}

static void skip_under_asan(void) {
  if (UNDER_ASAN) {
    print_message("skipped: RLIMIT_AS cannot be lowered under AddressSanitizer\n");
    skip();
  }
}

/* ------------------------------------------------------------- normal --- */

/* Text made UTF-8: NULL when it is already (ASCII, multi-byte, empty);
 * else each invalid part (a stray byte, a cut sequence at the end, a
 * surrogate) one U+FFFD, the valid rest as it was. */
static void test_utf8_repair(void **state) {
  (void)state;
  size_t n = 99;
  assert_null(util_utf8_repair("", 0, &n));
  assert_null(util_utf8_repair("plain ascii", 11, &n));
  assert_null(util_utf8_repair("caf\xc3\xa9 \xf0\x9f\x98\x80", 10, &n));
  assert_int_equal(n, 99); /* untouched when nothing was copied */
  char *r = util_utf8_repair("a\xff" "b\xed\xa0\x80" "c\xe2\x82", 9, &n);
  assert_non_null(r);
  assert_string_equal(r, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd");
  assert_int_equal(n, strlen(r));
  free(r);
  r = util_utf8_repair("x\0\xff", 3, &n); /* by length: a NUL stays, and what follows it is repaired */
  assert_non_null(r);
  assert_int_equal(n, 5);
  assert_memory_equal(r, "x\0\xef\xbf\xbd", 5);
  free(r);
}

static void test_allocators_serve(void **state) {
  (void)state;
  char *p = util_xmalloc(0); /* 0 is served as 1: never NULL */
  assert_non_null(p);
  p = util_xrealloc(p, 100);
  memset(p, 1, 100);
  p = util_xrealloc(p, 0);
  assert_non_null(p);
  free(p);
  int *z = util_xcalloc(16, sizeof *z);
  for (int i = 0; i < 16; i++) assert_int_equal(z[i], 0);
  free(z);
  free(util_xcalloc(0, 8));
  assert_null(util_strdup(NULL));
  char *s = util_fmt("%s-%d-%*s|", "a", 42, 3000, "x");
  assert_int_equal(strlen(s), strlen("a-42-") + 3000 + 1);
  assert_memory_equal(s, "a-42-  ", 7);
  free(s);
}

/* ubuf_try_add reports a size it cannot hold and leaves the buffer as it was. */
static void test_ubuf_try_add_reports(void **state) {
  (void)state;
  ubuf b = {0};
  assert_int_equal(ubuf_try_add(&b, "0123456789", 10), 0);
  char *before = b.p;
  size_t cap = b.cap;
  assert_int_equal(ubuf_try_add(&b, "x", SIZE_MAX - 5), -1); /* 10 + n overflows size_t */
  assert_int_equal(b.n, 10);
  assert_int_equal(b.cap, cap);
  assert_ptr_equal(b.p, before);
  assert_memory_equal(b.p, "0123456789", 10);
  assert_int_equal(ubuf_add(&b, "ab", 2), 0);
  assert_int_equal(b.n, 12);
  ubuf_free(&b);
}

/* ------------------------------------------------------ out of memory --- */

static void child_xmalloc(void *arg, const char *note) {
  (void)arg;
  (void)note;
  free(util_xmalloc(IMPOSSIBLE));
}

static void child_xcalloc(void *arg, const char *note) {
  (void)arg;
  (void)note;
  free(util_xcalloc(SIZE_MAX / 2, 4)); /* the product overflows: calloc refuses */
}

static void child_xrealloc(void *arg, const char *note) {
  (void)arg;
  (void)note;
  char *p = util_xmalloc(16);
  free(util_xrealloc(p, IMPOSSIBLE));
}

static void test_impossible_sizes_abort_named(void **state) {
  (void)state;
  child_result r;
  char want[64];
  run_child(child_xmalloc, NULL, &r);
  snprintf(want, sizeof want, "%zu bytes)", IMPOSSIBLE);
  expect_oom_abort(&r, want);
  run_child(child_xcalloc, NULL, &r);
  snprintf(want, sizeof want, "%zu x 4 bytes)", SIZE_MAX / 2);
  expect_oom_abort(&r, want);
  run_child(child_xrealloc, NULL, &r);
  snprintf(want, sizeof want, "%zu bytes)", IMPOSSIBLE);
  expect_oom_abort(&r, want);
}

static void child_xmalloc_limited(void *arg, const char *note) {
  (void)arg;
  (void)note;
  limit_address_space();
  char *p = util_xmalloc((size_t)256 << 20);
  p[0] = 1; /* reached only if the limit did not hold */
  free(p);
}

/* An ordinary size, when the process has no room left for it. */
static void test_xmalloc_under_rlimit(void **state) {
  (void)state;
  skip_under_asan();
  child_result r;
  run_child(child_xmalloc_limited, NULL, &r);
  expect_oom_abort(&r, "268435456 bytes)");
}

/* The crash note names the reason, not just "signal 6 (SIGABRT)": fatal.c's
 * SIGABRT handler still runs, and the engine's next start can tell which
 * workflow was running. */
static void child_noted(void *arg, const char *note) {
  (void)arg;
  fatal_arm(note, "owner-1");
  fatal_enter("wf-oom");
  free(util_xmalloc(IMPOSSIBLE));
}

static void test_crash_note_names_oom(void **state) {
  (void)state;
  child_result r;
  run_child(child_noted, NULL, &r);
  char want[64];
  snprintf(want, sizeof want, "%zu bytes)", IMPOSSIBLE);
  expect_oom_abort(&r, want);
  assert_true(r.noted);
  assert_string_equal(r.note_owner, "owner-1");
  assert_string_equal(r.note_id, "wf-oom");
  char what[96];
  snprintf(what, sizeof what, "out of memory (%zu bytes)", IMPOSSIBLE);
  assert_string_equal(r.note_what, what);
}

/* BUG (engine/base/util.c, util_fmt): vasprintf's failure came back as NULL, and
 * callers use the string at once (error_json, kill reasons, paths): a NULL
 * dereference far from the cause. Fix: util_fmt allocates with util_xmalloc
 * and aborts with the size it could not get. */
static void child_fmt_limited(void *arg, const char *note) {
  (void)arg;
  (void)note;
  limit_address_space();
  char *s = util_fmt("%*s", 256 << 20, "");
  if (!s) _exit(3); /* the defect: NULL handed to the caller */
  free(s);
}

static void BUG_fmt_out_of_memory_named(void **state) {
  (void)state;
  skip_under_asan();
  child_result r;
  run_child(child_fmt_limited, NULL, &r);
  expect_oom_abort(&r, "268435457 bytes)");
}

/* BUG (engine/base/util.c, ubuf_add): growth that failed returned -1, which most
 * callers ignore (render, json_for_output, the CLI's artifact list), going on
 * with a short or NULL buffer. Fix: ubuf_add aborts with the size; the
 * callers that can answer a failure call ubuf_try_add. */
static void child_ubuf_limited(void *arg, const char *note) {
  (void)arg;
  (void)note;
  limit_address_space();
  static char chunk[1 << 20];
  ubuf b = {0};
  for (int i = 0; i < 1024; i++) ubuf_add(&b, chunk, sizeof chunk); /* 1 GiB: past the limit */
  if (b.n < (size_t)1024 << 20) _exit(4); /* the defect: bytes dropped without a word */
  ubuf_free(&b);
}

static void BUG_ubuf_growth_named(void **state) {
  (void)state;
  skip_under_asan();
  child_result r;
  run_child(child_ubuf_limited, NULL, &r);
  expect_oom_abort(&r, "");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_utf8_repair),
      cmocka_unit_test(test_allocators_serve),
      cmocka_unit_test(test_ubuf_try_add_reports),
      cmocka_unit_test(test_impossible_sizes_abort_named),
      cmocka_unit_test(test_xmalloc_under_rlimit),
      cmocka_unit_test(test_crash_note_names_oom),
  };
  const struct CMUnitTest bugs[] = {
      cmocka_unit_test(BUG_fmt_out_of_memory_named),
      cmocka_unit_test(BUG_ubuf_growth_named),
  };
  if (argc > 1 && strcmp(argv[1], "bugs") == 0) return cmocka_run_group_tests_name("unit_util_bugs", bugs, NULL, NULL);
  return cmocka_run_group_tests_name("unit_util", tests, NULL, NULL);
}
