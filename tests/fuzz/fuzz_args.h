/* What every harness that embeds the engine passes to libFuzzer first. */
#ifndef ENGINE_FUZZ_ARGS_H
#define ENGINE_FUZZ_ARGS_H

#include <stdlib.h>
#include <string.h>

/* -detect_leaks=0 unless given: the engine keeps caches across inputs, which
 * a per-input leak check would report (ASan's check at exit still runs). */
static void no_leak_check_per_input(int *argc, char ***argv) {
  for (int i = 1; i < *argc; i++)
    if (strncmp((*argv)[i], "-detect_leaks=", 14) == 0) return;
  static char flag[] = "-detect_leaks=0";
  static char **args; /* kept for the process's life */
  args = malloc(sizeof(char *) * (size_t)(*argc + 2));
  memcpy(args, *argv, sizeof(char *) * (size_t)*argc);
  args[*argc] = flag;
  args[*argc + 1] = NULL;
  *argv = args;
  (*argc)++;
}

#endif
