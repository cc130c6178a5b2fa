/* lua_fs: the file-system calls activity code needs, as native calls. Every
 * activity runs as a coroutine on the engine's one loop thread, so a shell
 * started with io.popen or os.execute (realpath, ls, find, sha256sum, mkdir
 * -p, id -u) stalls every session until it exits; these calls return at
 * once, or after one local file read.
 *
 *   local fs = require "fs"
 *   fs.realpath(path) -> absolute path without symlinks | nil, err (the path must exist)
 *   fs.list(dir) -> {{name=, type=}, ...} sorted by name (byte order), "." and ".."
 *     left out, type "file" | "dir" | "link" | "other" as lstat sees it
 *     (a symlink is a "link", never followed); more than MAX_ENTRIES is an error
 *   fs.lstat(path) -> {type=, size=, mode=} (mode: the permission bits) | nil, err
 *   fs.mkdir_p(path [, mode=0755]) -> true | nil, err (like mkdir -p)
 *   fs.sha256_file(path) -> 64 lowercase hex chars | nil, err (a regular file;
 *     a symlink is refused, not followed)
 *   fs.getuid() -> the engine's real user id
 *
 * Errors are "<path>: <what>" (strerror(3) text for a failed call). Every
 * descriptor is opened O_CLOEXEC: a child started meanwhile inherits none.
 *
 * This file is also built alone as a loadable module (build/fs.so, see
 * CMakeLists.txt) so that the Lua library's plain-lua5.4 tests use the same
 * code; it must not depend on the rest of the engine. */
#include "lua_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENTRIES 100000
#define MAX_ENTRIES_TEXT "100000"
#define READ_CHUNK 65536
#define LISTING_MT "engine.fs.listing"

/* ------------------------------------------------------------- results --- */

/* nil, "<path>: <what>" */
static int fail_msg(lua_State *L, const char *path, const char *what) {
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s", path, what);
  return 2;
}

static int fail_errno(lua_State *L, const char *path, int err) {
  return fail_msg(L, path, strerror(err));
}

/* The path argument at i, or NULL (with *len set) when it holds a NUL byte:
 * the C calls would see only the part before it. */
static const char *path_arg(lua_State *L, int i, size_t *len) {
  const char *p = luaL_checklstring(L, i, len);
  return memchr(p, 0, *len) ? NULL : p;
}

/* Declares p (and len) from argument i; returns nil, err for a path no call
 * could take. */
#define CHECK_PATH(L, i, p, len)                                                  \
  size_t len;                                                                     \
  const char *p = path_arg(L, i, &len);                                           \
  if (!p) return fail_msg(L, lua_tostring(L, i), "the path contains a NUL byte"); \
  if (len == 0) return fail_msg(L, "(empty path)", strerror(ENOENT))

static const char *type_name(mode_t m) {
  return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "link" : "other";
}

/* The type name of a readdir d_type, NULL when it is not known. */
static const char *dirent_type(unsigned char t) {
  switch (t) {
    case DT_REG: return "file";
    case DT_DIR: return "dir";
    case DT_LNK: return "link";
    case DT_UNKNOWN: return NULL;
    default: return "other";
  }
}

/* ------------------------------------------------------------ realpath --- */

static int l_realpath(lua_State *L) {
  CHECK_PATH(L, 1, p, len);
  char out[PATH_MAX];
  if (!realpath(p, out)) return fail_errno(L, p, errno);
  lua_pushstring(L, out);
  return 1;
}

/* ---------------------------------------------------------------- list --- */

/* A directory being read: owned by a userdata, so that an error raised while
 * the entries are turned into Lua values (out of memory) leaks nothing. */
typedef struct listing {
  DIR *dir;
  struct entry {
    char *name;
    const char *type;
  } * v;
  size_t n, cap;
} listing;

static void listing_release(listing *l) {
  if (l->dir) closedir(l->dir);
  for (size_t i = 0; i < l->n; i++) free(l->v[i].name);
  free(l->v);
  memset(l, 0, sizeof *l);
}

static int listing_gc(lua_State *L) {
  listing_release(luaL_checkudata(L, 1, LISTING_MT));
  return 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* Appends name to l; 0, or -1 when out of memory. */
static int listing_add(listing *l, const char *name, const char *type) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    struct entry *v = realloc(l->v, cap * sizeof *v);
    if (!v) return -1;
    l->v = v;
    l->cap = cap;
  }
  char *copy = strdup(name);
  if (!copy) return -1;
  l->v[l->n++] = (struct entry){copy, type};
  return 0;
}

static int l_list(lua_State *L) {
  CHECK_PATH(L, 1, dir, len);
  listing *l = lua_newuserdatauv(L, sizeof *l, 0);
  memset(l, 0, sizeof *l);
  luaL_setmetatable(L, LISTING_MT);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fail_errno(L, dir, errno);
  l->dir = fdopendir(fd); /* owns fd from here */
  if (!l->dir) {
    int e = errno;
    close(fd);
    return fail_errno(L, dir, e);
  }
  /* what went wrong is noted, and reported once the directory is closed */
  char bad_entry[NAME_MAX + 1] = "";
  const char *what = NULL;
  int err = 0;
  for (;;) {
    errno = 0;
    struct dirent *e = readdir(l->dir);
    if (!e) {
      err = errno;
      break;
    }
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (l->n >= MAX_ENTRIES) {
      what = "too many entries (more than " MAX_ENTRIES_TEXT ")";
      break;
    }
    /* the type readdir gives is lstat's, without a stat per entry (and
     * known in a directory that may be read but not searched, as find(1)
     * knows it); some file systems leave it to a stat */
    const char *type = dirent_type(e->d_type);
    struct stat st;
    if (!type) {
      if (fstatat(dirfd(l->dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue; /* removed since readdir saw it */
        err = errno;
        snprintf(bad_entry, sizeof bad_entry, "%s", e->d_name);
        break;
      }
      type = type_name(st.st_mode);
    }
    if (listing_add(l, e->d_name, type) != 0) {
      err = ENOMEM;
      break;
    }
  }
  if (err || what) {
    listing_release(l);
    lua_pushnil(L);
    lua_pushfstring(L, "%s%s%s: %s", dir, *bad_entry ? "/" : "", bad_entry, what ? what : strerror(err));
    return 2;
  }
  if (l->n) qsort(l->v, l->n, sizeof *l->v, by_name);
  lua_createtable(L, (int)l->n, 0);
  for (size_t i = 0; i < l->n; i++) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, l->v[i].name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, l->v[i].type);
    lua_setfield(L, -2, "type");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  listing_release(l);
  return 1;
}

/* --------------------------------------------------------------- lstat --- */

static int l_lstat(lua_State *L) {
  CHECK_PATH(L, 1, p, len);
  struct stat st;
  if (lstat(p, &st) != 0) return fail_errno(L, p, errno);
  lua_createtable(L, 0, 3);
  lua_pushstring(L, type_name(st.st_mode));
  lua_setfield(L, -2, "type");
  lua_pushinteger(L, (lua_Integer)st.st_size);
  lua_setfield(L, -2, "size");
  lua_pushinteger(L, (lua_Integer)(st.st_mode & 07777));
  lua_setfield(L, -2, "mode");
  return 1;
}

/* ------------------------------------------------------------- mkdir_p --- */

/* Creates each missing directory on the path, as mkdir -p does: one that
 * exists (or a symlink to one) is fine; the last component gets mode (under
 * the umask), those above it also u+wx so that the walk can go on. */
static int l_mkdir_p(lua_State *L) {
  CHECK_PATH(L, 1, p, len);
  lua_Integer mode = luaL_optinteger(L, 2, 0755);
  luaL_argcheck(L, mode >= 0 && mode <= 07777, 2, "mode must be from 0 to 07777");
  char buf[PATH_MAX];
  if (len >= sizeof buf) return fail_errno(L, p, ENAMETOOLONG);
  memcpy(buf, p, len + 1);
  size_t end = len;
  while (end > 1 && buf[end - 1] == '/') end--; /* "a/b/" is "a/b" */
  for (size_t i = 1; i <= end; i++) {
    if (i < end && buf[i] != '/') continue;
    if (buf[i - 1] == '/') continue; /* "//" or the leading "/" */
    int last = i == end;
    char saved = buf[i];
    buf[i] = 0;
    mode_t m = (mode_t)mode | (last ? 0 : S_IWUSR | S_IXUSR);
    if (mkdir(buf, m) != 0) {
      int e = errno;
      struct stat st;
      if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) return fail_errno(L, buf, e == EEXIST && !last ? ENOTDIR : e);
    }
    buf[i] = saved;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* --------------------------------------------------------- sha256_file --- */

static int l_sha256_file(lua_State *L) {
  CHECK_PATH(L, 1, p, len);
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: the
   * file named, not what a symlink there points to */
  int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    struct stat st;
    if (e == ELOOP && lstat(p, &st) == 0 && S_ISLNK(st.st_mode)) return fail_msg(L, p, "is a symlink (not followed)");
    return fail_errno(L, p, e);
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail_msg(L, p, "not a regular file");
  }
  /* no Lua call until both are freed: nothing can raise in between */
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char *chunk = malloc(READ_CHUNK);
  int err = 0;
  if (!ctx || !chunk || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) err = ENOMEM;
  while (!err) {
    ssize_t r = read(fd, chunk, READ_CHUNK);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) err = errno;
    if (r <= 0) break;
    if (EVP_DigestUpdate(ctx, chunk, (size_t)r) != 1) err = ENOMEM;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (!err && EVP_DigestFinal_ex(ctx, md, &mdlen) != 1) err = ENOMEM;
  EVP_MD_CTX_free(ctx);
  free(chunk);
  close(fd);
  if (err) return fail_errno(L, p, err);
  static const char hex[] = "0123456789abcdef";
  char out[2 * EVP_MAX_MD_SIZE + 1];
  for (unsigned int i = 0; i < mdlen; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  lua_pushlstring(L, out, 2 * (size_t)mdlen);
  return 1;
}

/* -------------------------------------------------------------- getuid --- */

static int l_getuid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getuid());
  return 1;
}

/* ---------------------------------------------------------------- open --- */

int luaopen_engine_fs(lua_State *L) {
  static const luaL_Reg lib[] = {
      {"realpath", l_realpath},       {"list", l_list},     {"lstat", l_lstat}, {"mkdir_p", l_mkdir_p},
      {"sha256_file", l_sha256_file}, {"getuid", l_getuid}, {NULL, NULL}};
  if (luaL_newmetatable(L, LISTING_MT)) {
    lua_pushcfunction(L, listing_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlib(L, lib);
  return 1;
}

int luaopen_fs(lua_State *L) {
  return luaopen_engine_fs(L);
}
