/* config: see config.h. (Being built: the loader lands in the next commit.) */
#include "config.h"

#include <stdlib.h>
#include <string.h>

int config_load(const char *path, char *err, size_t errlen) { (void)path, (void)err, (void)errlen; return 0; }
int config_reload(char *changed, size_t changedlen, char *restart, size_t restartlen, char *err, size_t errlen) {
  (void)err, (void)errlen;
  if (changedlen) *changed = 0;
  if (restartlen) *restart = 0;
  return 0;
}
const char *config_file(void) { return NULL; }
void config_flag(const char *key, const char *value) { (void)key, (void)value; }
const setting SETTINGS[] = {{"db", "ENGINE_DB", SET_PATH, "./engine.db", 0, 0, NULL, 0, "the database"}};
const size_t SETTINGS_COUNT = 1;
void config_get(size_t i, config_entry *e) { memset(e, 0, sizeof *e); e->s = &SETTINGS[i]; }
const setting *config_find(const char *key) { return strcmp(key, "db") == 0 ? &SETTINGS[0] : NULL; }
