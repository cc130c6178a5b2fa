/* home: see home.h. */
#include "home.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char exe_dir[PATH_MAX];
static char home[PATH_MAX];
static char lua_dir[PATH_MAX + 8];
static const char *home_source;
static char home_err[PATH_MAX + 256];
static int found;

static int is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A home is a folder that holds the Lua library. */
static int has_lua(const char *dir) {
  char p[PATH_MAX + 8];
  int w = snprintf(p, sizeof p, "%s/lua", dir);
  return w > 0 && (size_t)w < sizeof p && is_dir(p);
}

/* The directory of the running binary (from /proc/self/exe), or "". */
static const char *exe_folder(void) {
  if (!*exe_dir) {
    ssize_t len = readlink("/proc/self/exe", exe_dir, sizeof exe_dir - 1);
    if (len <= 0) return exe_dir[0] = 0, exe_dir;
    exe_dir[len] = 0;
    char *slash = strrchr(exe_dir, '/');
    if (slash == exe_dir) exe_dir[1] = 0; /* the binary is in / */
    else if (slash) *slash = 0;
  }
  return exe_dir;
}

/* CMAKE_HOME_DIRECTORY from DIR/CMakeCache.txt: the source tree a build
 * directory was configured from. Read, never compiled in. */
static int source_of_build(const char *dir, char *out, size_t n) {
  char p[PATH_MAX + 32], line[PATH_MAX + 64];
  snprintf(p, sizeof p, "%s/CMakeCache.txt", dir);
  FILE *f = fopen(p, "r");
  if (!f) return -1;
  int ok = -1;
  static const char KEY[] = "CMAKE_HOME_DIRECTORY:INTERNAL=";
  while (ok != 0 && fgets(line, sizeof line, f)) {
    if (strncmp(line, KEY, sizeof KEY - 1) != 0) continue;
    line[strcspn(line, "\r\n")] = 0;
    const char *v = line + sizeof KEY - 1;
    if (strlen(v) < n) memcpy(out, v, strlen(v) + 1), ok = 0;
  }
  fclose(f);
  return ok;
}

static void find_home(void) {
  found = 1;
  const char *env = getenv("ENGINE_HOME");
  if (env && *env) {
    if (!has_lua(env)) {
      snprintf(home_err, sizeof home_err, "ENGINE_HOME=%s has no lua/ folder (the engine's Lua library)", env);
      return;
    }
    snprintf(home, sizeof home, "%s", env);
    home_source = "ENGINE_HOME";
    return;
  }
  const char *exe = exe_folder();
  char p[PATH_MAX];
  if (*exe && snprintf(p, sizeof p, "%.3900s/../share/engine", exe) > 0 && has_lua(p)) {
    if (!realpath(p, home)) snprintf(home, sizeof home, "%s", p);
    home_source = "installed";
    return;
  }
  /* a development build: the binary sits in the build directory (or a
   * folder of it, as the tests and benchmarks do) */
  snprintf(p, sizeof p, "%s", exe);
  for (int up = 0; up < 4 && *p; up++) {
    char src[PATH_MAX];
    if (source_of_build(p, src, sizeof src) == 0 && has_lua(src)) {
      snprintf(home, sizeof home, "%s", src);
      home_source = "build tree";
      return;
    }
    char *slash = strrchr(p, '/');
    if (!slash || slash == p) break;
    *slash = 0;
  }
  snprintf(home_err, sizeof home_err,
           "cannot find the engine's files: no lua/ in %s/../share/engine (an installed engine), and the binary is "
           "not in a build directory; set ENGINE_HOME (the `home` setting) to the folder that holds lua/",
           *exe ? exe : "(the binary's folder)");
}

const char *engine_home(void) {
  if (!found) find_home();
  return *home ? home : NULL;
}

const char *engine_home_error(void) {
  engine_home();
  return home_err;
}

const char *engine_home_source(void) {
  engine_home();
  return home_source ? home_source : "none";
}

char *engine_home_path(const char *sub, char *out, size_t n) {
  const char *h = engine_home();
  if (!h) return n ? (*out = 0, out) : out;
  snprintf(out, n, "%s/%s", h, sub);
  return out;
}

const char *engine_lua_dir(void) {
  const char *d = getenv("ENGINE_LUA_DIR");
  if (d && *d) return d;
  if (!*lua_dir) {
    const char *h = engine_home();
    snprintf(lua_dir, sizeof lua_dir, "%s", h ? h : ".");
    strncat(lua_dir, "/lua", sizeof lua_dir - strlen(lua_dir) - 1);
  }
  return lua_dir;
}
