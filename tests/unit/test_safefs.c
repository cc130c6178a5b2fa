/* Unit tests for engine/safefs: safefs_render (the bounded, terminal-safe
 * rendering of a value for logs and events) and safefs.list on trees a hostile
 * sandbox could leave in output/ (deep chains, paths over 4 KiB, symlinks,
 * FIFOs, sockets, floods of files), through the module's Lua binding.
 *
 * Tests whose name starts with BUG_ document a defect that was found and
 * fixed; they run as the ctest entry unit_safefs_bugs (see each comment). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "safefs.h"
#include "testutil.h"

/* ------------------------------------------------------------ helpers --- */

static void render_is(const char *in, size_t len, size_t max, const char *want) {
  char *got = safefs_render(in, len, max);
  assert_non_null(got);
  assert_string_equal(got, want);
  free(got);
}

/* A Lua state with `safefs` as a global and `root` set to a fresh directory. */
static lua_State *new_state(char **root) {
  lua_State *L = luaL_newstate();
  assert_non_null(L);
  luaL_openlibs(L);
  luaopen_engine_safefs(L);
  lua_setglobal(L, "safefs");
  *root = tu_mkdtemp();
  lua_pushstring(L, *root);
  lua_setglobal(L, "root");
  return L;
}

/* nftw (tu_rmtree) cannot reach below 4 KiB of path; rm(1) can. */
static void rm_tree(char *root) {
  char *cmd = NULL;
  assert_true(asprintf(&cmd, "rm -rf -- '%s'", root) > 0);
  assert_int_equal(system(cmd), 0);
  free(cmd);
  free(root);
}

/* Runs a chunk that returns nothing or raises: raising fails the test. */
static void run(lua_State *L, const char *chunk) {
  if (luaL_loadstring(L, chunk) != LUA_OK || lua_pcall(L, 0, 0, 0) != LUA_OK)
    fail_msg("Lua chunk failed: %s\n%s", lua_tostring(L, -1), chunk);
}

/* Makes dir/name (a directory) and returns an fd for it. */
static int mkdir_fd(int dir, const char *name) {
  assert_int_equal(mkdirat(dir, name, 0755), 0);
  int fd = openat(dir, name, O_RDONLY | O_DIRECTORY);
  assert_true(fd >= 0);
  return fd;
}

static void touch_at(int dir, const char *name) {
  int fd = openat(dir, name, O_WRONLY | O_CREAT, 0644);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "x", 1), 1);
  close(fd);
}

/* Under root/output: a 40-deep chain d/d/.../d/bottom.txt, a chain of
 * 250-byte directory names longer than 4 KiB with a file at the end, a
 * symlink, a FIFO, a unix socket, and report.md. */
static void hostile_tree(const char *root) {
  char *out = tu_path(root, "output");
  assert_int_equal(mkdir(out, 0755), 0);
  int o = open(out, O_RDONLY | O_DIRECTORY);
  assert_true(o >= 0);
  touch_at(o, "report.md");
  assert_int_equal(symlinkat("/etc/passwd", o, "link"), 0);
  assert_int_equal(mkfifoat(o, "fifo", 0644), 0);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s/sock", out);
  if (strlen(out) + 6 < sizeof a.sun_path) assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  close(s);
  int d = dup(o);
  for (int i = 0; i < 40; i++) {
    int n = mkdir_fd(d, "d");
    close(d);
    d = n;
  }
  touch_at(d, "bottom.txt");
  close(d);
  char name[251];
  memset(name, 'n', 250);
  name[250] = 0;
  d = mkdir_fd(o, "long");
  for (int i = 0; i < 20; i++) { /* 20 * 251 bytes: past 4 KiB */
    int n = mkdir_fd(d, name);
    close(d);
    d = n;
  }
  touch_at(d, "end.txt");
  close(d);
  close(o);
  free(out);
}

/* ------------------------------------------------------------- render --- */

static void test_render_plain_and_escapes(void **state) {
  (void)state;
  render_is("output/report.md", 16, 200, "output/report.md");
  render_is("", 0, 200, "");
  render_is("a\x1b]0;title\x07" "b", 12, 200, "a\\x1b]0;title\\x07b");
  render_is("tab\tnl\ndel\x7f", 11, 200, "tab\\x09nl\\x0adel\\x7f");
  render_is("back\\slash", 10, 200, "back\\\\slash");
  render_is("caf\xc3\xa9", 5, 200, "caf\xc3\xa9");               /* é stays */
  render_is("\xe2\x82\xac", 3, 200, "\xe2\x82\xac");             /* € stays */
  render_is("\xf0\x9f\x98\x80", 4, 200, "\xf0\x9f\x98\x80");     /* emoji stays */
  render_is("\xff\xfe", 2, 200, "\\xff\\xfe");                   /* not UTF-8 */
  render_is("\xc0\x80", 2, 200, "\\xc0\\x80");                   /* overlong NUL */
  render_is("\xed\xa0\x80", 3, 200, "\\xed\\xa0\\x80");          /* surrogate */
  render_is("\xe2\x82", 2, 200, "\\xe2\\x82");                   /* cut short */
  render_is("x\xc2\x9b" "2J", 5, 200, "x\\u009b2J");             /* C1 CSI */
  render_is("a\xe2\x80\xae" "b", 5, 200, "a\\u202eb");           /* bidi override */
  render_is("nul\0byte", 8, 200, "nul\\x00byte");
}

static void test_render_bounded(void **state) {
  (void)state;
  size_t len = 10 * 1024 * 1024;
  char *big = malloc(len);
  memset(big, 'a', len);
  char *got = safefs_render(big, len, 200);
  char want[300];
  memset(want, 'a', 200);
  strcpy(want + 200, "... (10485760 bytes)");
  assert_string_equal(got, want);
  /* deterministic: the same value renders the same, whatever came before */
  char *again = safefs_render(big, len, 200);
  assert_string_equal(got, again);
  free(again);
  free(got);
  /* at most max bytes of the value, even when every one needs escaping */
  memset(big, 0x1b, 1000);
  got = safefs_render(big, 1000, 200);
  assert_int_equal(strlen(got), 200 * 4 + strlen("... (1000 bytes)"));
  free(got);
  free(big);
  /* never cut inside a character */
  render_is("ab\xc3\xa9", 4, 3, "ab... (4 bytes)");
  render_is("abc", 3, 3, "abc");
  render_is("abcd", 4, 0, "... (4 bytes)");
}

/* --------------------------------------------------------------- list --- */

static void test_list_accounts_for_every_entry(void **state) {
  (void)state;
  char *root;
  lua_State *L = new_state(&root);
  hostile_tree(root);
  run(L, "local es = assert(safefs.list(root, 'output'))\n"
         "local by = {}\n"
         "for _, e in ipairs(es) do\n"
         "  assert(#e.path < 4096, 'a listed path is 4 KiB or more')\n"
         "  by[e.path] = e\n"
         "end\n"
         "assert(by['output/report.md'].type == 'file' and not by['output/report.md'].skipped)\n"
         "assert(by['output/link'].type == 'symlink')\n"
         "assert(by['output/fifo'].type == 'fifo')\n"
         "assert(not by['output/sock'] or by['output/sock'].type == 'socket')\n"
         "local deep = 'output' .. string.rep('/d', 32)\n"
         "assert(by[deep] and by[deep].skipped == 'too_deep', 'the 32nd level says its contents were not listed')\n"
         "assert(not by[deep .. '/d'], 'nothing below the depth limit is listed')\n"
         "for p in pairs(by) do assert(not p:find('bottom.txt', 1, true)) end\n"
         "local long\n"
         "for _, e in ipairs(es) do if e.skipped == 'path_too_long' then assert(not long); long = e end end\n"
         "assert(long, 'the path over 4 KiB is reported')\n"
         "assert(long.path_bytes >= 4096)\n"
         "assert(long.path:find('... (' .. long.path_bytes .. ' bytes)', 1, true), long.path)\n"
         "assert(#long.path <= 200 + 30)\n");
  lua_close(L);
  rm_tree(root);
}

static void test_list_max_entries_counts_the_rest(void **state) {
  (void)state;
  char *root;
  lua_State *L = new_state(&root);
  char *out = tu_path(root, "output");
  assert_int_equal(mkdir(out, 0755), 0);
  int o = open(out, O_RDONLY | O_DIRECTORY);
  int sub = mkdir_fd(o, "flood");
  for (int i = 0; i < 50; i++) {
    char n[16];
    snprintf(n, sizeof n, "f%02d", i);
    touch_at(sub, n);
  }
  close(sub);
  touch_at(o, "a.txt");
  touch_at(o, "z.txt");
  close(o);
  free(out);
  /* 3 top-level entries first, then 7 of the flood; 43 counted */
  run(L, "local es = assert(safefs.list(root, 'output', {max_entries = 10}))\n"
         "assert(#es == 11, #es)\n"
         "local last, by = es[11], {}\n"
         "for _, e in ipairs(es) do by[e.path] = e end\n"
         "assert(by['output/a.txt'] and by['output/z.txt'] and by['output/flood'], 'siblings of a flood are listed')\n"
         "assert(last.type == 'more' and last.skipped == 'too_many' and last.count == 43 and last.path == 'output',\n"
         "  last.count)\n"
         "assert(#assert(safefs.list(root, 'output')) == 53, 'no sentinel under the default cap')\n"
         "local ok, err = pcall(safefs.list, root, 'output', {max_depth = 1000})\n"
         "assert(not ok and err:find('max_depth'), err)\n"
         "local none, why = safefs.list(root, 'nothing')\n"
         "assert(none == nil and why == 'no such directory', why)\n");
  lua_close(L);
  rm_tree(root);
}

/* ---------------------------------------------------------------- bugs --- */

/* BUG: list_dir returned at depth > 32 without a trace, so the file at the
 * bottom of a 40-deep chain in output/ vanished from the artifacts with no
 * message. Cause: the depth guard closed the directory and returned. Fixed:
 * the directory at the limit is listed with skipped = "too_deep". */
static void BUG_list_drops_deep_entries_silently(void **state) {
  (void)state;
  char *root;
  lua_State *L = new_state(&root);
  hostile_tree(root);
  run(L, "local n = 0\n"
         "for _, e in ipairs(assert(safefs.list(root, 'output'))) do\n"
         "  if e.skipped == 'too_deep' then n = n + 1 end\n"
         "end\n"
         "assert(n == 1, 'the cut in the 40-deep chain is reported once, got ' .. n)\n");
  lua_close(L);
  rm_tree(root);
}

/* BUG: a path of 4 KiB or more was cut by snprintf into path[4096] and listed
 * under the cut name, which collect then read (failing) and saved as an empty
 * artifact. Cause: no check of the full length before formatting. Fixed: such
 * an entry is listed with skipped = "path_too_long" and a bounded rendering. */
static void BUG_list_cuts_long_paths(void **state) {
  (void)state;
  char *root;
  lua_State *L = new_state(&root);
  hostile_tree(root);
  run(L, "for _, e in ipairs(assert(safefs.list(root, 'output'))) do\n"
         "  if #e.path >= 4095 then error('a cut path is listed: ' .. #e.path .. ' bytes') end\n"
         "  if e.type == 'file' and not e.skipped then\n"
         "    assert(safefs.read(root, e.path), 'a listed file cannot be read: ' .. e.path:sub(1, 80))\n"
         "  end\n"
         "end\n");
  lua_close(L);
  rm_tree(root);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_render_plain_and_escapes),
      cmocka_unit_test(test_render_bounded),
      cmocka_unit_test(test_list_accounts_for_every_entry),
      cmocka_unit_test(test_list_max_entries_counts_the_rest),
  };
  const struct CMUnitTest bugs[] = {
      cmocka_unit_test(BUG_list_drops_deep_entries_silently),
      cmocka_unit_test(BUG_list_cuts_long_paths),
  };
  if (argc > 1 && strcmp(argv[1], "bugs") == 0) return cmocka_run_group_tests_name("unit_safefs_bugs", bugs, NULL, NULL);
  return cmocka_run_group_tests_name("unit_safefs", tests, NULL, NULL);
}
