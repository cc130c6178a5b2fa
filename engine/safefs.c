/* safefs: file access confined to a root directory, for the trusted side that
 * reads and writes a sandbox's workspace while untrusted code runs in it. Every
 * path component is opened with openat(O_NOFOLLOW), so neither "..", an
 * absolute path nor a symlink planted by the sandbox (even one swapped in after
 * a check) can lead outside the root.
 *
 *   local safefs = require "safefs"
 *   safefs.write(root, "working/out.txt", data [, {mkdirs=true, mode=0644}])
 *   safefs.read(root, "input/a.txt", max_bytes) -> data | nil, err, truncated
 *   safefs.list(root, "output") -> {{path=, size=, type="file"|"dir"}, ...} (recursive)
 *   safefs.check(rel) -> normalized relative path | nil, err */
#include "safefs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PATH_LEN 4096
#define MAX_DEPTH 32

/* Splits rel into components, refusing absolute paths, "..", empty paths and
 * NUL bytes. Writes "a/b/c" (normalized) into out. */
static int normalize(const char *rel, size_t len, char *out, size_t outlen, const char **err) {
  if (len == 0) return *err = "empty path", -1;
  if (memchr(rel, 0, len)) return *err = "path contains a NUL byte", -1;
  if (rel[0] == '/') return *err = "absolute paths are not allowed", -1;
  if (len >= outlen) return *err = "path too long", -1;
  size_t o = 0;
  const char *p = rel, *end = rel + len;
  while (p < end) {
    const char *s = memchr(p, '/', (size_t)(end - p));
    size_t n = s ? (size_t)(s - p) : (size_t)(end - p);
    if (n == 2 && p[0] == '.' && p[1] == '.') return *err = "path traversal ('..') is not allowed", -1;
    if (n > 0 && !(n == 1 && p[0] == '.')) {
      if (o) out[o++] = '/';
      memcpy(out + o, p, n);
      o += n;
    }
    p += n + (s ? 1 : 0);
  }
  if (o == 0) return *err = "the path names the root itself", -1;
  out[o] = 0;
  return 0;
}

/* Opens the directory holding the last component of norm, walking from root
 * without following symlinks. Returns the dir fd and points *leaf at the name. */
static int open_parent(const char *root, char *norm, int mkdirs, const char **leaf, const char **err) {
  int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return *err = "the workspace root does not exist", -1;
  char *p = norm;
  for (;;) {
    char *slash = strchr(p, '/');
    if (!slash) break;
    *slash = 0;
    int next = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && mkdirs) {
      if (mkdirat(fd, p, 0755) != 0 && errno != EEXIST) {
        close(fd);
        return *err = "cannot create a directory on the path", -1;
      }
      next = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    *slash = '/';
    close(fd);
    if (next < 0) {
      *err = (errno == ELOOP || errno == ENOTDIR) ? "the path goes through a symlink or a file" : "no such directory";
      return -1;
    }
    fd = next;
    p = slash + 1;
  }
  *leaf = p;
  return fd;
}

static int fail(lua_State *L, const char *err) {
  lua_pushnil(L);
  lua_pushstring(L, err);
  return 2;
}

static int l_check(lua_State *L) {
  size_t len;
  const char *rel = luaL_checklstring(L, 1, &len);
  char norm[MAX_PATH_LEN];
  const char *err;
  if (normalize(rel, len, norm, sizeof norm, &err) != 0) return fail(L, err);
  lua_pushstring(L, norm);
  return 1;
}

static int l_write(lua_State *L) {
  const char *root = luaL_checkstring(L, 1);
  size_t len, dlen;
  const char *rel = luaL_checklstring(L, 2, &len);
  const char *data = luaL_checklstring(L, 3, &dlen);
  int mkdirs = 1, mode = 0644;
  if (lua_istable(L, 4)) {
    if (lua_getfield(L, 4, "mkdirs") != LUA_TNIL) mkdirs = lua_toboolean(L, -1);
    if (lua_getfield(L, 4, "mode") == LUA_TNUMBER) mode = (int)lua_tointeger(L, -1) & 0777;
  }
  char norm[MAX_PATH_LEN];
  const char *err, *leaf;
  if (normalize(rel, len, norm, sizeof norm, &err) != 0) return fail(L, err);
  int dir = open_parent(root, norm, mkdirs, &leaf, &err);
  if (dir < 0) return fail(L, err);
  /* write to a temp name, then rename: no half-written file, and a symlink
   * at the final name is replaced, never followed */
  char tmp[300];
  snprintf(tmp, sizeof tmp, ".%.200s.tmp%d", leaf, (int)getpid());
  int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    close(dir);
    return fail(L, "cannot create the file");
  }
  size_t off = 0;
  while (off < dlen) {
    ssize_t w = write(fd, data + off, dlen - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      close(fd);
      unlinkat(dir, tmp, 0);
      close(dir);
      return fail(L, "write failed");
    }
    off += (size_t)w;
  }
  close(fd);
  struct stat st;
  if (fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
    unlinkat(dir, tmp, 0);
    close(dir);
    return fail(L, "the path names a directory");
  }
  int rc = renameat(dir, tmp, dir, leaf);
  if (rc != 0) unlinkat(dir, tmp, 0);
  close(dir);
  if (rc != 0) return fail(L, "cannot move the file into place");
  lua_pushinteger(L, (lua_Integer)dlen);
  return 1;
}

static int l_read(lua_State *L) {
  const char *root = luaL_checkstring(L, 1);
  size_t len;
  const char *rel = luaL_checklstring(L, 2, &len);
  lua_Integer max = luaL_optinteger(L, 3, 1 << 20);
  char norm[MAX_PATH_LEN];
  const char *err, *leaf;
  if (normalize(rel, len, norm, sizeof norm, &err) != 0) return fail(L, err);
  int dir = open_parent(root, norm, 0, &leaf, &err);
  if (dir < 0) return fail(L, err);
  int fd = openat(dir, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  close(dir);
  if (fd < 0) return fail(L, errno == ELOOP ? "the file is a symlink" : "no such file");
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(L, "not a regular file");
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  lua_Integer total = 0;
  int truncated = 0;
  char chunk[16384];
  for (;;) {
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    lua_Integer take = r;
    if (total + take > max) {
      take = max - total;
      truncated = 1;
    }
    luaL_addlstring(&b, chunk, (size_t)take);
    total += take;
    if (truncated) break;
  }
  close(fd);
  luaL_pushresult(&b);
  lua_pushnil(L);
  lua_pushboolean(L, truncated);
  return 3;
}

/* Appends the entries under fd (recursively) to the table at -1. */
static void list_dir(lua_State *L, int fd, const char *prefix, int depth, lua_Integer *n) {
  if (depth > MAX_DEPTH) {
    close(fd);
    return;
  }
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[MAX_PATH_LEN];
    snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "/" : "", e->d_name);
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const char *type = S_ISREG(st.st_mode)   ? "file"
                       : S_ISDIR(st.st_mode) ? "dir"
                       : S_ISLNK(st.st_mode) ? "symlink"
                                             : "other";
    lua_createtable(L, 0, 3);
    lua_pushstring(L, path);
    lua_setfield(L, -2, "path");
    lua_pushinteger(L, (lua_Integer)st.st_size);
    lua_setfield(L, -2, "size");
    lua_pushstring(L, type);
    lua_setfield(L, -2, "type");
    lua_rawseti(L, -2, ++*n);
    if (S_ISDIR(st.st_mode)) {
      int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) list_dir(L, sub, path, depth + 1, n);
    }
  }
  closedir(d);
}

static int l_list(lua_State *L) {
  const char *root = luaL_checkstring(L, 1);
  size_t len = 0;
  const char *rel = luaL_optlstring(L, 2, ".", &len);
  int fd;
  char norm[MAX_PATH_LEN] = "";
  if (strcmp(rel, ".") == 0 || len == 0) {
    fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } else {
    const char *err, *leaf;
    if (normalize(rel, len, norm, sizeof norm, &err) != 0) return fail(L, err);
    int dir = open_parent(root, norm, 0, &leaf, &err);
    if (dir < 0) return fail(L, err);
    fd = openat(dir, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(dir);
  }
  if (fd < 0) return fail(L, "no such directory");
  lua_newtable(L);
  lua_Integer n = 0;
  list_dir(L, fd, norm, 0, &n);
  return 1;
}

int luaopen_engine_safefs(lua_State *L) {
  static const luaL_Reg lib[] = {
      {"check", l_check}, {"write", l_write}, {"read", l_read}, {"list", l_list}, {NULL, NULL}};
  luaL_newlib(L, lib);
  return 1;
}
