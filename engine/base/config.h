/* config: the engine's settings, from a configuration file, the environment
 * and flags. Every setting is an ENGINE_* environment variable (the table is
 * settings.c); the file (Lua table syntax, read as data) fills in the ones the
 * environment does not set, so the code that reads a setting reads it from
 * the environment, in C and in Lua alike. A flag overrides both. */
#ifndef ENGINE_CONFIG_H
#define ENGINE_CONFIG_H

#include <stddef.h>

typedef enum { SET_STRING, SET_PATH, SET_INT, SET_BOOL, SET_SECRET, SET_LIST, SET_ENUM } setting_type;

typedef struct setting {
  const char *key;      /* in the file: db = "/var/lib/engine/engine.db" */
  const char *env;      /* ENGINE_DB */
  setting_type type;
  const char *dflt;     /* what the engine does when it is unset, in words or a value ("" none) */
  long long min, max;   /* SET_INT's range */
  const char *choices;  /* SET_ENUM's values, "a|b|c" */
  int reloadable;       /* SIGHUP applies a new value without a restart */
  const char *help;
} setting;

extern const setting SETTINGS[];
extern const size_t SETTINGS_COUNT;

/* The default file, read when it exists and neither --config nor
 * ENGINE_CONFIG names another. */
#define CONFIG_DEFAULT_PATH "/etc/engine/engine.conf"

/* Reads the configuration file: PATH (from --config), else $ENGINE_CONFIG,
 * else CONFIG_DEFAULT_PATH when it exists (one this user cannot read is
 * skipped with a warning on stderr); "none" reads none. Every key is
 * checked (unknown: "did you mean"; type; range) and nothing is applied if
 * one is wrong: err names the file, the line and the key. Then each setting
 * the environment does not set is set from the file. 0, or -1 with err. */
int config_load(const char *path, char *err, size_t errlen);

/* SIGHUP: reads the same file again and applies the reloadable settings
 * whose value changed (and that the environment did not set). A bad file
 * changes nothing. changed gets the keys applied, comma-separated, and
 * restart the changed keys that need a restart. 0, or -1 with err. */
int config_reload(char *changed, size_t changedlen, char *restart, size_t restartlen, char *err, size_t errlen);

/* The file in use, or NULL. */
const char *config_file(void);

/* A flag set this setting (by key) to VALUE for this process. */
void config_flag(const char *key, const char *value);

/* One setting's effective value and where it came from: "default",
 * "FILE:LINE", "environment" or "flag". value is NULL when unset. */
typedef struct config_entry {
  const setting *s;
  const char *value;
  char source[4200];
} config_entry;

/* Fills e for SETTINGS[i]. */
void config_get(size_t i, config_entry *e);

/* A whole-number setting (SET_INT, by key) as it is now: its environment
 * variable (where the file's value went too), else its default. 0; or -1
 * with err when the variable is not a whole number in the setting's range
 * ("ENGINE_X must be a whole number from 0 to 100, not \"abc\""), and *out
 * is the default then. */
int config_int(const char *key, long long *out, char *err, size_t errlen);

#endif
