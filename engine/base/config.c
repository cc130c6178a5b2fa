/* config: see config.h. The file is Lua table syntax read as data: a chunk
 * run in an empty environment (no libraries, no globals) whose assignments
 * are caught one by one as they happen, so each is checked with its line,
 * and nothing else can run for long. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "render.h"
#include "util.h"

#define CONFIG_MAX_BYTES (1 << 20)
#define CONFIG_MAX_INSTRUCTIONS 1000000

/* What a file said: a value and its line per setting (NULL: not in it). */
#define MAX_SETTINGS 128

typedef struct file_values {
  char *value[MAX_SETTINGS]; /* indexed like SETTINGS */
  int line[MAX_SETTINGS];
} file_values;

static char *file_path;              /* the file in use, or NULL */
static file_values loaded;           /* what it said at start or the last reload */
static unsigned char from_env[MAX_SETTINGS];  /* the real environment set it before we read the file */
static char *flag_value[MAX_SETTINGS];

const char *config_file(void) { return file_path; }

/* The setting named KEY, or NULL. */
static const setting *config_find(const char *key) {
  for (size_t i = 0; i < SETTINGS_COUNT; i++)
    if (strcmp(SETTINGS[i].key, key) == 0) return &SETTINGS[i];
  return NULL;
}

static size_t setting_index(const setting *s) { return (size_t)(s - SETTINGS); }

/* Edit distance, for "did you mean". */
static size_t distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), row[64];
  if (la >= 63 || lb >= 63) return 99;
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t cur = row[j], sub = prev + (a[i - 1] != b[j - 1]);
      row[j] = row[j] + 1 < row[j - 1] + 1 ? row[j] + 1 : row[j - 1] + 1;
      if (sub < row[j]) row[j] = sub;
      prev = cur;
    }
  }
  return row[lb];
}

/* The key closest to what was written: an environment variable's name, a
 * near miss in spelling, or one that contains it. */
static const char *nearest_key(const char *k) {
  char low[64] = "";
  for (size_t i = 0; k[i] && i < sizeof low - 1; i++) low[i] = (char)(k[i] >= 'A' && k[i] <= 'Z' ? k[i] + 32 : k[i]);
  const char *plain = strncmp(low, "engine_", 7) == 0 ? low + 7 : low;
  const char *best = NULL;
  size_t bestd = 3;
  for (size_t i = 0; i < SETTINGS_COUNT; i++) {
    size_t d = distance(plain, SETTINGS[i].key);
    if (d < bestd || (!best && strlen(plain) >= 4 && strstr(SETTINGS[i].key, plain))) best = SETTINGS[i].key, bestd = d;
  }
  return best;
}

static const char *lua_kind(lua_State *L, int i) {
  if (lua_isinteger(L, i)) return "an integer";
  if (lua_type(L, i) == LUA_TNUMBER) return "a number";
  return lua_typename(L, lua_type(L, i));
}

/* The value at stack index 3 as the setting's string, or a Lua error. */
static char *setting_value(lua_State *L, const setting *s) {
  const char *key = s->key;
  switch (s->type) {
    case SET_INT: {
      lua_Integer n = 0;
      if (lua_isinteger(L, 3)) n = lua_tointeger(L, 3);
      else if (lua_type(L, 3) == LUA_TNUMBER && lua_tonumberx(L, 3, NULL) == (lua_Number)(lua_Integer)lua_tonumber(L, 3))
        n = (lua_Integer)lua_tonumber(L, 3);
      else if (lua_type(L, 3) == LUA_TNUMBER) luaL_error(L, "%s must be a whole number, not %f", key, lua_tonumber(L, 3));
      else luaL_error(L, "%s must be a whole number, not %s", key, lua_kind(L, 3));
      if (n < s->min || n > s->max) {
        char range[128]; /* lua_pushfstring knows no %lld */
        snprintf(range, sizeof range, "%lld is out of range (%lld to %lld)", (long long)n, s->min, s->max);
        luaL_error(L, "%s = %s", key, range);
      }
      return util_fmt("%lld", (long long)n);
    }
    case SET_BOOL:
      if (lua_type(L, 3) != LUA_TBOOLEAN) luaL_error(L, "%s must be true or false, not %s", key, lua_kind(L, 3));
      return util_strdup(lua_toboolean(L, 3) ? "1" : "0");
    case SET_LIST:
      if (lua_type(L, 3) == LUA_TTABLE) {
        ubuf b = {0};
        lua_Integer n = luaL_len(L, 3);
        for (lua_Integer i = 1; i <= n; i++) {
          if (lua_geti(L, 3, i) != LUA_TSTRING || !*lua_tostring(L, -1) || strchr(lua_tostring(L, -1), ':')) {
            ubuf_free(&b);
            luaL_error(L, "%s[%d] must be a path (a string without ':')", key, (int)i);
          }
          if (i > 1) ubuf_add(&b, ":", 1);
          ubuf_add(&b, lua_tostring(L, -1), strlen(lua_tostring(L, -1)));
          lua_pop(L, 1);
        }
        ubuf_add(&b, "", 1);
        return b.p;
      }
      /* fall through: one string, colon-separated */
      __attribute__((fallthrough));
    default: {
      if (lua_type(L, 3) != LUA_TSTRING)
        luaL_error(L, "%s must be a string%s, not %s", key, s->type == SET_LIST ? " or a list of strings" : "",
                   lua_kind(L, 3));
      size_t len;
      const char *v = lua_tolstring(L, 3, &len);
      if (strlen(v) != len) luaL_error(L, "%s contains a NUL byte", key);
      if (s->type == SET_PATH && !*v) luaL_error(L, "%s is an empty path", key);
      if (s->type != SET_ENUM) return util_strdup(v);
      const char *c = s->choices;
      while (*c) {
        size_t n = strcspn(c, "|");
        if (n == len && strncasecmp(c, v, n) == 0) return util_fmt("%.*s", (int)n, c);
        c += n + (c[n] == '|');
      }
      luaL_error(L, "%s = \"%s\" is not one of %s", key, v, s->choices);
    }
  }
  return NULL;
}

/* env.KEY = value: the one thing a configuration file does. */
static int on_assign(lua_State *L) {
  file_values *fv = lua_touserdata(L, lua_upvalueindex(1));
  if (lua_type(L, 2) != LUA_TSTRING) return luaL_error(L, "a key must be a name");
  const char *k = lua_tostring(L, 2);
  const setting *s = config_find(k);
  if (!s) {
    const char *near = nearest_key(k);
    return near ? luaL_error(L, "unknown key '%s' (did you mean '%s'?)", k, near)
                : luaL_error(L, "unknown key '%s' (engine config lists every key)", k);
  }
  size_t i = setting_index(s);
  lua_Debug ar;
  int line = lua_getstack(L, 1, &ar) && lua_getinfo(L, "l", &ar) ? ar.currentline : 0;
  if (fv->value[i]) return luaL_error(L, "%s is set twice (first on line %d)", k, fv->line[i]);
  if (lua_isnil(L, 3)) return 0;
  fv->value[i] = setting_value(L, s);
  fv->line[i] = line;
  return 0;
}

static int on_read(lua_State *L) {
  return luaL_error(L, "'%s' is not defined: the configuration file holds values only (key = \"value\")",
                    lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?");
}

static void on_count(lua_State *L, lua_Debug *ar) {
  lua_getinfo(L, "l", ar);
  luaL_error(L, "line %d: the configuration file runs too long: it must hold values only", ar->currentline);
}

static void values_free(file_values *fv) {
  for (size_t i = 0; i < SETTINGS_COUNT; i++) free(fv->value[i]);
  memset(fv, 0, sizeof *fv);
}

static void *l_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  size_t *used = ud;
  if (nsize == 0) {
    if (ptr) *used -= osize;
    free(ptr);
    return NULL;
  }
  size_t before = ptr ? osize : 0;
  if (*used - before + nsize > (size_t)16 << 20) return NULL; /* a data file needs little */
  void *p = realloc(ptr, nsize);
  if (p) *used = *used - before + nsize;
  return p;
}

/* Reads and checks PATH into fv. 0, or -1 with err "PATH:LINE: ...". */
static int read_file(const char *path, file_values *fv, char *err, size_t errlen) {
  memset(fv, 0, sizeof *fv);
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    util_seterr(err, errlen, "cannot read the configuration file %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  if (!S_ISREG(sb.st_mode) || sb.st_size > CONFIG_MAX_BYTES) {
    util_seterr(err, errlen, "the configuration file %s is %s", path,
                S_ISREG(sb.st_mode) ? "over 1 MiB" : util_file_kind(sb.st_mode));
    close(fd);
    return -1;
  }
  ubuf b = {0};
  int e = util_read_fd(fd, CONFIG_MAX_BYTES, &b);
  close(fd);
  if (e) {
    util_seterr(err, errlen, "cannot read the configuration file %s: %s", path, strerror(e));
    ubuf_free(&b);
    return -1;
  }
  size_t used = 0;
  lua_State *L = lua_newstate(l_alloc, &used);
  if (!L) {
    ubuf_free(&b);
    util_seterr(err, errlen, "out of memory reading %s", path);
    return -1;
  }
  char *chunkname = util_fmt("@%s", path);
  int rc = luaL_loadbufferx(L, b.p ? b.p : "", b.n, chunkname, "t");
  free(chunkname);
  ubuf_free(&b);
  if (rc == LUA_OK) {
    lua_newtable(L); /* the chunk's _ENV: empty, its metatable catches every use */
    lua_newtable(L);
    lua_pushlightuserdata(L, fv);
    lua_pushcclosure(L, on_assign, 1);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, on_read);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    lua_setupvalue(L, -2, 1);
    lua_sethook(L, on_count, LUA_MASKCOUNT, CONFIG_MAX_INSTRUCTIONS);
    rc = lua_pcall(L, 0, 0, 0);
  }
  if (rc != LUA_OK) {
    const char *m = lua_tostring(L, -1);
    util_seterr(err, errlen, "%s", m ? m : "out of memory");
    if (m && strncmp(m, path, strlen(path)) != 0) util_seterr(err, errlen, "%s: %s", path, m);
    values_free(fv);
  }
  lua_close(L);
  return rc == LUA_OK ? 0 : -1;
}

int config_load(const char *path, char *err, size_t errlen) {
  if (SETTINGS_COUNT > MAX_SETTINGS) {
    util_seterr(err, errlen, "internal: too many settings");
    return -1;
  }
  for (size_t i = 0; i < SETTINGS_COUNT; i++) from_env[i] = getenv(SETTINGS[i].env) != NULL;
  int must_exist = 1;
  if (!path || !*path) path = getenv("ENGINE_CONFIG");
  if (!path || !*path) path = CONFIG_DEFAULT_PATH, must_exist = 0;
  if (strcmp(path, "none") == 0) return 0;
  if (!must_exist && access(path, F_OK) != 0) return 0;
  if (!must_exist && access(path, R_OK) != 0) {
    /* the service's file (root:engine 0640) on a machine where this user is
     * not in its group: the command runs with the environment's settings */
    fprintf(stderr, "engine: %s is not readable by this user (%s): its settings do not apply here; ENGINE_CONFIG=none "
            "says so on purpose\n", path, strerror(errno));
    return 0;
  }
  file_values fv;
  if (read_file(path, &fv, err, errlen) != 0) return -1;
  for (size_t i = 0; i < SETTINGS_COUNT; i++)
    if (fv.value[i] && !from_env[i]) setenv(SETTINGS[i].env, fv.value[i], 1);
  loaded = fv;
  file_path = util_strdup(path);
  return 0;
}

static void list_add(char *out, size_t n, const char *key) {
  size_t used = strlen(out);
  if (used + strlen(key) + 3 < n) snprintf(out + used, n - used, "%s%s", used ? ", " : "", key);
}

int config_reload(char *changed, size_t changedlen, char *restart, size_t restartlen, char *err, size_t errlen) {
  if (changedlen) *changed = 0;
  if (restartlen) *restart = 0;
  if (!file_path) return 0;
  file_values fv;
  if (read_file(file_path, &fv, err, errlen) != 0) return -1;
  for (size_t i = 0; i < SETTINGS_COUNT; i++) {
    const char *was = loaded.value[i], *now = fv.value[i];
    if (from_env[i] || (!was && !now) || (was && now && strcmp(was, now) == 0)) continue;
    if (!SETTINGS[i].reloadable) {
      list_add(restart, restartlen, SETTINGS[i].key);
      free(fv.value[i]); /* what is in force stays what the file said at start */
      fv.value[i] = was ? util_strdup(was) : NULL;
      fv.line[i] = loaded.line[i];
      continue;
    }
    if (now) setenv(SETTINGS[i].env, now, 1);
    else unsetenv(SETTINGS[i].env);
    list_add(changed, changedlen, SETTINGS[i].key);
  }
  values_free(&loaded);
  loaded = fv;
  return 0;
}

void config_flag(const char *key, const char *value) {
  const setting *s = config_find(key);
  if (!s) return;
  size_t i = setting_index(s);
  free(flag_value[i]);
  flag_value[i] = util_strdup(value);
}

int config_int(const char *key, long long *out, char *err, size_t errlen) {
  const setting *s = config_find(key);
  *out = 0;
  if (!s || s->type != SET_INT) {
    util_seterr(err, errlen, "%s is not a whole-number setting", key);
    return -1;
  }
  *out = strtoll(s->dflt, NULL, 10);
  const char *v = getenv(s->env);
  if (!v || !*v) return 0;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (errno || *end || end == v || n < s->min || n > s->max) {
    char shown[64]; /* it goes to a terminal */
    render_buf(shown, sizeof shown, v, strlen(v), 0);
    util_seterr(err, errlen, "%s must be a whole number from %lld to %lld, not \"%s\"", s->env, s->min, s->max,
                shown);
    return -1;
  }
  *out = n;
  return 0;
}

void config_get(size_t i, config_entry *e) {
  memset(e, 0, sizeof *e);
  e->s = &SETTINGS[i];
  if (flag_value[i]) {
    e->value = flag_value[i];
    snprintf(e->source, sizeof e->source, "flag");
  } else if (from_env[i] || (!loaded.value[i] && getenv(SETTINGS[i].env))) {
    e->value = getenv(SETTINGS[i].env);
    snprintf(e->source, sizeof e->source, "environment%s", loaded.value[i] ? " (over the file)" : "");
  } else if (loaded.value[i]) {
    e->value = getenv(SETTINGS[i].env);
    snprintf(e->source, sizeof e->source, "%.4000s:%d", file_path, loaded.line[i]);
  } else {
    snprintf(e->source, sizeof e->source, "default");
  }
}
