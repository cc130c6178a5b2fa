/* safefs: file access confined to a root directory, for the trusted side that
 * reads and writes a sandbox's workspace while untrusted code runs in it. Every
 * path component is opened with openat(O_NOFOLLOW), so neither "..", an
 * absolute path nor a symlink planted by the sandbox (even one swapped in after
 * a check) can lead outside the root.
 *
 *   local safefs = require "safefs"
 *   safefs.write(root, "working/out.txt", data [, {mkdirs=true, mode=0644}])
 *   safefs.read(root, "input/a.txt", max_bytes) -> data | nil, err, truncated
 *   safefs.list(root, "output" [, {max_entries=10000, max_depth=32}])
 *     -> {{path=, size=, type=, skipped=}, ...} (recursive; see l_list)
 *   safefs.check(rel) -> normalized relative path | nil, err
 *   safefs.render(value [, max=200]) -> value fit for a log line (see safefs_render)
 *
 * Error strings never quote the path they are about: a sandbox can make paths
 * of any length, and the caller decides how much of one to show. */
#include "safefs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define MAX_PATH_LEN 4096
#define DEFAULT_MAX_DEPTH 32
#define HARD_MAX_DEPTH 64 /* one open directory per level while walking */
#define DEFAULT_MAX_ENTRIES 10000
/* entries past max_entries are only counted, and only this many: a directory
 * the sandbox keeps filling cannot keep the walk going forever */
#define MAX_COUNTED 1000000
#define SHOWN_BYTES 200 /* of a path too long to list, this much is shown */

/* ------------------------------------------------------------ render --- */

/* Out of memory gives NULL: a listing shows a placeholder, the binding raises. */
char *safefs_render(const char *s, size_t len, size_t max) {
  ubuf b = {0};
  int bad = 0;
  size_t i = 0;
  while (i < len && !bad) {
    const unsigned char *p = (const unsigned char *)s + i;
    uint32_t cp = 0;
    size_t badlen;
    size_t k = util_utf8_decode((const char *)p, len - i, &cp, &badlen);
    if (i + (k ? k : 1) > max) break;
    char esc[16];
    if (k == 1 && cp == '\\') {
      bad = ubuf_try_add(&b, "\\\\", 2);
    } else if (k && !util_unsafe_codepoint(cp)) {
      bad = ubuf_try_add(&b, p, k);
    } else if (k > 1) {
      bad = ubuf_try_add(&b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", cp));
    } else {
      bad = ubuf_try_add(&b, esc, (size_t)snprintf(esc, sizeof esc, "\\x%02x", p[0]));
    }
    i += k ? k : 1;
  }
  char tail[48];
  if (!bad && i < len) bad = ubuf_try_add(&b, tail, (size_t)snprintf(tail, sizeof tail, "... (%zu bytes)", len));
  if (!bad) bad = ubuf_try_add(&b, "", 1);
  if (bad) {
    ubuf_free(&b);
    return NULL;
  }
  return b.p;
}

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
    int e = errno;
    close(dir);
    return fail(L, e == ENOSPC || e == EDQUOT ? "cannot create the file: No space left on device" : "cannot create the file");
  }
  size_t off = 0;
  while (off < dlen) {
    ssize_t w = write(fd, data + off, dlen - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      unlinkat(dir, tmp, 0);
      close(dir);
      return fail(L, e == ENOSPC || e == EDQUOT ? "write failed: No space left on device" : "write failed");
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

/* A recursive listing in progress. Every entry of the tree is either listed or
 * accounted for: a directory whose contents were not listed carries the reason
 * (skipped = "too_deep" | "path_too_long" | "unreadable"), and entries past
 * max_entries are counted into one last {type = "more", count = N, skipped =
 * "too_many"} entry. Each directory's own entries are listed before anything
 * below them, so a flood in one subdirectory cannot hide its siblings (nor
 * output/report.md); once the table is full the walk only counts what it
 * still reads and descends no further, so N is a lower bound. */
typedef struct walk {
  lua_State *L;
  lua_Integer n;    /* entries in the table */
  lua_Integer max;  /* entries listed at most */
  lua_Integer more; /* entries counted past max */
  int max_depth;
} walk;

static const char *type_name(mode_t m) {
  return S_ISREG(m)    ? "file"
         : S_ISDIR(m)  ? "dir"
         : S_ISLNK(m)  ? "symlink"
         : S_ISFIFO(m) ? "fifo"
         : S_ISSOCK(m) ? "socket"
         : S_ISCHR(m)  ? "chardev"
         : S_ISBLK(m)  ? "blockdev"
                       : "other";
}

/* Appends {path, size, type [, skipped] [, path_bytes]} to the table at -1 and
 * returns its index, or only counts it (returns 0) once the table is full. */
static lua_Integer add_entry(walk *w, const char *path, const struct stat *st, const char *skipped,
                             size_t path_bytes) {
  if (w->n >= w->max) {
    w->more++;
    return 0;
  }
  lua_State *L = w->L;
  lua_createtable(L, 0, 5);
  lua_pushstring(L, path);
  lua_setfield(L, -2, "path");
  lua_pushinteger(L, st ? (lua_Integer)st->st_size : 0);
  lua_setfield(L, -2, "size");
  lua_pushstring(L, st ? type_name(st->st_mode) : "unknown");
  lua_setfield(L, -2, "type");
  if (skipped) {
    lua_pushstring(L, skipped);
    lua_setfield(L, -2, "skipped");
  }
  if (path_bytes) {
    lua_pushinteger(L, (lua_Integer)path_bytes);
    lua_setfield(L, -2, "path_bytes");
  }
  lua_rawseti(L, -2, ++w->n);
  return w->n;
}

/* Marks entry idx of the table at -1 (0: an entry only counted) as skipped. */
static void mark_skipped(walk *w, lua_Integer idx, const char *why) {
  if (!idx) return;
  lua_rawgeti(w->L, -1, idx);
  lua_pushstring(w->L, why);
  lua_setfield(w->L, -2, "skipped");
  lua_pop(w->L, 1);
}

/* Whether the directory fd has no entries; closes fd. */
static int dir_empty(int fd) {
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return 0;
  }
  struct dirent *e;
  int empty = 1;
  while (empty && (e = readdir(d)))
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = 0;
  closedir(d);
  return empty;
}

typedef struct subdir {
  char *name;
  lua_Integer idx;
} subdir;

/* Lists the entries of the directory fd (they are at depth `depth`, the listed
 * directory's own entries at 1), then what is below each of its
 * subdirectories; closes fd. */
static void list_dir(walk *w, int fd, const char *prefix, size_t plen, int depth) {
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return;
  }
  subdir *subs = NULL;
  size_t nsubs = 0, cap = 0;
  struct dirent *e;
  char path[MAX_PATH_LEN];
  while ((e = readdir(d)) && w->more < MAX_COUNTED) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    size_t nlen = strlen(e->d_name), full = plen + (plen ? 1 : 0) + nlen;
    struct stat st;
    int have = fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (full >= MAX_PATH_LEN) {
      /* never a cut path that could name another file: a bounded prefix to
       * show, the full length, and (for a directory) nothing below it */
      char *whole = util_fmt("%s%s%s", prefix, plen ? "/" : "", e->d_name);
      char *shown = safefs_render(whole, full, SHOWN_BYTES);
      add_entry(w, shown ? shown : "(path too long)", have ? &st : NULL, "path_too_long", full);
      free(shown);
      free(whole);
      continue;
    }
    memcpy(path, prefix, plen);
    if (plen) path[plen] = '/';
    memcpy(path + full - nlen, e->d_name, nlen + 1);
    lua_Integer idx = add_entry(w, path, have ? &st : NULL, have ? NULL : "unreadable", 0);
    /* below a full table nothing more is listed: no need to descend */
    if (!have || !S_ISDIR(st.st_mode) || !idx) continue;
    if (nsubs == cap) {
      cap = cap ? cap * 2 : 16;
      subdir *ns = realloc(subs, cap * sizeof *ns);
      if (!ns) { /* out of memory: the listing goes on, this directory not walked */
        mark_skipped(w, idx, "unreadable");
        continue;
      }
      subs = ns;
    }
    subs[nsubs++] = (subdir){util_strdup(e->d_name), idx};
  }
  for (size_t i = 0; i < nsubs; i++) {
    size_t nlen = strlen(subs[i].name), full = plen + (plen ? 1 : 0) + nlen;
    memcpy(path, prefix, plen);
    if (plen) path[plen] = '/';
    memcpy(path + full - nlen, subs[i].name, nlen + 1);
    /* the sandbox may have swapped the directory for a symlink meanwhile:
     * O_NOFOLLOW | O_DIRECTORY refuse it */
    int sub = openat(dirfd(d), subs[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
      mark_skipped(w, subs[i].idx, "unreadable");
    else if (depth >= w->max_depth) {
      /* what is below would be deeper than max_depth: say so if anything is */
      if (!dir_empty(sub)) mark_skipped(w, subs[i].idx, "too_deep");
    } else
      list_dir(w, sub, path, full, depth + 1);
    free(subs[i].name);
  }
  free(subs);
  closedir(d);
}

static lua_Integer opt_field(lua_State *L, int idx, const char *name, lua_Integer def, lua_Integer max) {
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, name);
  lua_Integer v = def;
  if (!lua_isnil(L, -1)) {
    int isnum;
    v = lua_tointegerx(L, -1, &isnum);
    if (!isnum || v < 1 || v > max) luaL_error(L, "safefs.list: %s must be an integer from 1 to %d", name, (int)max);
  }
  lua_pop(L, 1);
  return v;
}

/* safefs.list(root, rel [, {max_entries=, max_depth=}]): every entry under rel,
 * recursively, in directory order; paths are relative to root. Symlinks are
 * listed as such, never followed. See struct walk for what is not listed. */
static int l_list(lua_State *L) {
  const char *root = luaL_checkstring(L, 1);
  size_t len = 0;
  const char *rel = luaL_optlstring(L, 2, ".", &len);
  walk w = {.L = L,
            .max = opt_field(L, 3, "max_entries", DEFAULT_MAX_ENTRIES, (lua_Integer)1 << 30),
            .max_depth = (int)opt_field(L, 3, "max_depth", DEFAULT_MAX_DEPTH, HARD_MAX_DEPTH)};
  int fd, open_errno = 0;
  char norm[MAX_PATH_LEN] = "";
  if (strcmp(rel, ".") == 0 || len == 0) {
    fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    open_errno = errno;
  } else {
    const char *err, *leaf;
    if (normalize(rel, len, norm, sizeof norm, &err) != 0) return fail(L, err);
    int dir = open_parent(root, norm, 0, &leaf, &err);
    if (dir < 0) return fail(L, err);
    fd = openat(dir, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    open_errno = errno;
    close(dir);
  }
  if (fd < 0)
    return fail(L, open_errno == ELOOP || open_errno == ENOTDIR ? "not a directory (or a symlink)" : "no such directory");
  lua_newtable(L);
  list_dir(&w, fd, norm, strlen(norm), 1);
  if (w.more) {
    lua_createtable(L, 0, 4);
    lua_pushstring(L, *norm ? norm : ".");
    lua_setfield(L, -2, "path");
    lua_pushstring(L, "more");
    lua_setfield(L, -2, "type");
    lua_pushinteger(L, w.more);
    lua_setfield(L, -2, "count");
    lua_pushstring(L, "too_many");
    lua_setfield(L, -2, "skipped");
    lua_rawseti(L, -2, ++w.n);
  }
  return 1;
}

static int l_render(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  lua_Integer max = luaL_optinteger(L, 2, SHOWN_BYTES);
  char *out = safefs_render(s, len, max < 0 ? 0 : (size_t)max);
  if (!out) return luaL_error(L, "safefs.render: out of memory");
  lua_pushstring(L, out);
  free(out);
  return 1;
}

int luaopen_engine_safefs(lua_State *L) {
  static const luaL_Reg lib[] = {{"check", l_check}, {"write", l_write}, {"read", l_read},
                                 {"list", l_list},   {"render", l_render}, {NULL, NULL}};
  luaL_newlib(L, lib);
  return 1;
}
