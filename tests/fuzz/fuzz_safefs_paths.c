/* fuzz_safefs_paths: engine/base/safefs.c path resolution as a property: whatever
 * the sandbox planted in the workspace and whatever relative path the model
 * names, no safefs call reads, writes or lists anything outside the root.
 *
 * A scratch directory (mkdtemp, in /dev/shm when it can) holds root/ (the workspace) and outside/
 * (outside/secret, which nothing may read or change). The input is lines, at
 * most 64 of them, each one operation:
 *   d PATH          the sandbox makes a directory     (inside root only, as a
 *   f PATH          the sandbox makes a file           sandbox can: every
 *   l PATH<TAB>TO   the sandbox makes a symlink to TO  component opened
 *                   (@OUT and @ROOT in TO become the   without following
 *                   absolute outside/ and root paths)  symlinks)
 *   r PATH          safefs.read(root, PATH)
 *   w PATH / W PATH safefs.write(root, PATH, ...) with / without mkdirs
 *   L PATH          safefs.list(root, PATH)
 *   c PATH          safefs.check(PATH)
 * After every input: outside/ holds exactly secret, unchanged; the scratch
 * directory holds exactly root/ and outside/; nothing read is the secret;
 * every listed path and every written file is reached from root without
 * following a symlink; check() gives a clean relative path or an error. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safefs.h"

#define SECRET "outside-secret\n"
#define WRITTEN "written-by-safefs"
#define MAX_OPS 64

static lua_State *L;
static char base[4096], root[4200], outside[4200];
static int root_fd = -1;

static void finding(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_safefs_paths: %s%s%.300s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

/* Removes everything inside the directory fd (never following a symlink); closes fd. */
static void empty_dir(int fd) {
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (unlinkat(dirfd(d), e->d_name, 0) == 0) continue;
    int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub >= 0) empty_dir(sub);
    unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
  }
  closedir(d);
}

static void cleanup(void) {
  if (!base[0]) return;
  int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) empty_dir(fd);
  rmdir(base);
}

/* Opens the directory holding the last component of rel (empty and "."
 * components skipped, ".." refused), inside root and following no symlink:
 * what a confined writer can reach. Returns the fd and points *leaf into buf
 * (a copy of rel cut in place), or -1. */
static int walk_parent(const char *rel, size_t n, char *buf, const char **leaf) {
  if (n == 0 || n >= 4096 || memchr(rel, 0, n)) return -1;
  memcpy(buf, rel, n);
  buf[n] = 0;
  char *parts[4096];
  size_t k = 0;
  for (char *save = NULL, *p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
    if (!strcmp(p, "..")) return -1;
    if (strcmp(p, ".") != 0) parts[k++] = p;
  }
  if (k == 0) return -1;
  int fd = dup(root_fd);
  for (size_t i = 0; i + 1 < k && fd >= 0; i++) {
    int next = openat(fd, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
  }
  *leaf = parts[k - 1];
  return fd;
}

/* Whether rel names an entry reached from root without following a symlink
 * (lstat of the entry itself), and its content when it is a regular file. */
static int reachable(const char *rel, size_t n, char *content, size_t cap) {
  char buf[4096];
  const char *leaf;
  int dir = walk_parent(rel, n, buf, &leaf);
  if (dir < 0) return 0;
  struct stat st;
  int ok = fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (ok && content && S_ISREG(st.st_mode)) {
    int fd = openat(dir, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, content, cap - 1) : -1;
    content[r > 0 ? r : 0] = 0;
    if (fd >= 0) close(fd);
  }
  close(dir);
  return ok;
}

static void plant(char op, const char *path, size_t n, const char *to, size_t ton) {
  char buf[4096];
  const char *leaf;
  int dir = walk_parent(path, n, buf, &leaf);
  if (dir < 0) return;
  if (op == 'd') {
    mkdirat(dir, leaf, 0755);
  } else if (op == 'f') {
    int fd = openat(dir, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (write(fd, "inside", 6) != 6) finding("cannot write a planted file", NULL);
      close(fd);
    }
  } else if (op == 'l' && ton < 2048) {
    char target[8192];
    size_t k = 0;
    for (size_t i = 0; i < ton && k < sizeof target - 4300; i++) {
      if (ton - i >= 4 && !memcmp(to + i, "@OUT", 4)) {
        k += (size_t)snprintf(target + k, sizeof target - k, "%s", outside);
        i += 3;
      } else if (ton - i >= 5 && !memcmp(to + i, "@ROOT", 5)) {
        k += (size_t)snprintf(target + k, sizeof target - k, "%s", root);
        i += 4;
      } else {
        target[k++] = to[i] ? to[i] : '_';
      }
    }
    target[k] = 0;
    if (k) symlinkat(target, dir, leaf);
  }
  close(dir);
}

/* stack: -> results of safefs[fn](args...), at most 3 */
static int call(const char *fn, int nargs) {
  lua_getglobal(L, "safefs");
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  lua_insert(L, -(nargs + 1));
  if (lua_pcall(L, nargs, 3, 0) != LUA_OK) finding("safefs raised", lua_tostring(L, -1));
  return 3;
}

static void check_clean_relative(const char *s, size_t n) {
  if (n == 0) finding("check() gave an empty path", NULL);
  if (s[0] == '/') finding("check() gave an absolute path", s);
  const char *p = s, *end = s + n;
  while (p <= end) {
    const char *q = memchr(p, '/', (size_t)(end - p));
    size_t len = q ? (size_t)(q - p) : (size_t)(end - p);
    if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
      finding("check() gave a path with an empty, '.' or '..' component", s);
    if (!q) break;
    p = q + 1;
  }
}

static void op(char c, const char *path, size_t n) {
  int top = lua_gettop(L);
  if (c == 'r') {
    lua_pushstring(L, root);
    lua_pushlstring(L, path, n);
    lua_pushinteger(L, 4096);
    call("read", 3);
    if (lua_type(L, -3) == LUA_TSTRING) {
      const char *got = lua_tostring(L, -3);
      if (!strcmp(got, SECRET)) finding("read returned the file outside the root", NULL);
      char content[64];
      if (!reachable(path, n, content, sizeof content) || strcmp(content, got) != 0)
        finding("read returned a file not reached from the root without a symlink", NULL);
    }
  } else if (c == 'w' || c == 'W') {
    lua_pushstring(L, root);
    lua_pushlstring(L, path, n);
    lua_pushstring(L, WRITTEN);
    lua_createtable(L, 0, 1);
    lua_pushboolean(L, c == 'w');
    lua_setfield(L, -2, "mkdirs");
    call("write", 4);
    if (lua_isinteger(L, -3)) {
      char content[64];
      if (!reachable(path, n, content, sizeof content) || strcmp(content, WRITTEN) != 0)
        finding("write reported success, but the file is not where the root says", NULL);
    }
  } else if (c == 'L') {
    lua_pushstring(L, root);
    lua_pushlstring(L, path, n);
    call("list", 2);
    if (lua_istable(L, -3)) {
      lua_Integer k = (lua_Integer)luaL_len(L, -3);
      for (lua_Integer i = 1; i <= k; i++) {
        lua_rawgeti(L, -3, i);
        lua_getfield(L, -1, "type");
        int more = lua_isstring(L, -1) && !strcmp(lua_tostring(L, -1), "more");
        lua_pop(L, 1);
        lua_getfield(L, -1, "skipped");
        int too_long = lua_isstring(L, -1) && !strcmp(lua_tostring(L, -1), "path_too_long");
        lua_pop(L, 1);
        lua_getfield(L, -1, "path");
        size_t pn;
        const char *p = lua_tolstring(L, -1, &pn);
        if (!p) finding("a listed entry has no path", NULL);
        if (!more && !too_long) {
          check_clean_relative(p, pn);
          if (!reachable(p, pn, NULL, 0)) finding("list gave a path not reached from the root without a symlink", p);
        }
        lua_pop(L, 2);
      }
    }
  } else if (c == 'c') {
    lua_pushlstring(L, path, n);
    call("check", 1);
    if (lua_type(L, -3) == LUA_TSTRING) {
      size_t cn;
      const char *s = lua_tolstring(L, -3, &cn);
      check_clean_relative(s, cn);
    }
  }
  lua_settop(L, top);
}

/* outside/ holds exactly secret, unchanged; base holds exactly root and outside. */
static void check_outside(void) {
  const char *dirs[2] = {base, outside};
  for (int k = 0; k < 2; k++) {
    DIR *d = opendir(dirs[k]);
    if (!d) finding("the scratch directory is gone", dirs[k]);
    struct dirent *e;
    while ((e = readdir(d))) {
      const char *n = e->d_name;
      if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
      if (k == 0 ? (strcmp(n, "root") && strcmp(n, "outside")) : strcmp(n, "secret"))
        finding("something was created outside the root", n);
    }
    closedir(d);
  }
  char path[4300], buf[64] = "";
  snprintf(path, sizeof path, "%s/secret", outside);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  ssize_t r = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  buf[r > 0 ? r : 0] = 0;
  if (strcmp(buf, SECRET) != 0) finding("the file outside the root was changed", NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  /* tmpfs when there is one: thousands of inputs a second make and remove files */
  const char *tmp = getenv("TMPDIR");
  if (access("/dev/shm", W_OK | X_OK) == 0) tmp = "/dev/shm";
  snprintf(base, sizeof base, "%s/fuzz_safefs.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(base)) {
    perror("mkdtemp");
    exit(1);
  }
  atexit(cleanup);
  snprintf(root, sizeof root, "%s/root", base);
  snprintf(outside, sizeof outside, "%s/outside", base);
  char secret[4300];
  snprintf(secret, sizeof secret, "%s/secret", outside);
  if (mkdir(root, 0755) || mkdir(outside, 0755)) finding("cannot make the scratch directories", base);
  FILE *f = fopen(secret, "w");
  if (!f || fputs(SECRET, f) < 0 || fclose(f)) finding("cannot write the secret", secret);
  root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) abort();
  return 0;
}

/* A state of its own for each input, closed at the end, so libFuzzer's leak
 * check sees a leak in safefs.c. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  empty_dir(dup(root_fd));
  L = luaL_newstate();
  if (!L) abort();
  luaopen_engine_safefs(L);
  lua_setglobal(L, "safefs");
  const char *s = (const char *)data, *end = s + size;
  for (int ops = 0; s < end && ops < MAX_OPS; ops++) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *line_end = nl ? nl : end;
    if (line_end - s >= 2 && s[1] == ' ') {
      char c = s[0];
      const char *arg = s + 2;
      size_t n = (size_t)(line_end - arg);
      if (c == 'd' || c == 'f') {
        plant(c, arg, n, NULL, 0);
      } else if (c == 'l') {
        const char *tab = memchr(arg, '\t', n);
        if (tab) plant('l', arg, (size_t)(tab - arg), tab + 1, (size_t)(line_end - tab - 1));
      } else {
        op(c, arg, n);
      }
    }
    s = nl ? nl + 1 : end;
  }
  check_outside();
  lua_close(L);
  return 0;
}
