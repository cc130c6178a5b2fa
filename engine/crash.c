#include "crash.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_POINTS 16

static struct {
  char name[48];
  long at, hits;
} points[MAX_POINTS];
static int npoints = -1;

static void parse(void) {
  npoints = 0;
  const char *spec = getenv("ENGINE_CRASH");
  if (!spec) return;
  char buf[512];
  strncpy(buf, spec, sizeof buf - 1);
  buf[sizeof buf - 1] = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && npoints < MAX_POINTS;
       tok = strtok_r(NULL, ",", &save)) {
    char *colon = strrchr(tok, ':');
    if (!colon) continue;
    *colon = 0;
    strncpy(points[npoints].name, tok, sizeof points[npoints].name - 1);
    points[npoints].at = atol(colon + 1);
    points[npoints].hits = 0;
    npoints++;
  }
}

void crash_point(const char *name) {
  if (npoints < 0) parse();
  for (int i = 0; i < npoints; i++) {
    if (strcmp(points[i].name, name) != 0) continue;
    if (++points[i].hits == points[i].at) kill(getpid(), SIGKILL);
  }
}
