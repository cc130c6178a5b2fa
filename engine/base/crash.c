#include "crash.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_POINTS 16

/* The points of one variable, parsed the first time one is passed. */
typedef struct points {
  const char *env;
  int n; /* -1: not parsed yet */
  struct {
    char name[48];
    long at, hits;
  } v[MAX_POINTS];
} points;

static points crashes = {"ENGINE_CRASH", -1, {{"", 0, 0}}};
static points faults = {"ENGINE_STORE_FAIL", -1, {{"", 0, 0}}};
static points stops = {"ENGINE_STOP", -1, {{"", 0, 0}}};

static void parse(points *p) {
  p->n = 0;
  const char *spec = getenv(p->env);
  if (!spec) return;
  char buf[512];
  strncpy(buf, spec, sizeof buf - 1);
  buf[sizeof buf - 1] = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && p->n < MAX_POINTS;
       tok = strtok_r(NULL, ",", &save)) {
    char *colon = strrchr(tok, ':');
    if (!colon) continue;
    *colon = 0;
    strncpy(p->v[p->n].name, tok, sizeof p->v[p->n].name - 1);
    p->v[p->n].at = atol(colon + 1);
    p->v[p->n].hits = 0;
    p->n++;
  }
}

/* Counts a pass of name; 1 when it is the n-th of an entry. */
static int pass(points *p, const char *name) {
  if (p->n < 0) parse(p);
  int hit = 0;
  for (int i = 0; i < p->n; i++) {
    if (strcmp(p->v[i].name, name) != 0) continue;
    if (++p->v[i].hits == p->v[i].at) hit = 1;
  }
  return hit;
}

void crash_point(const char *name) {
  if (pass(&crashes, name)) kill(getpid(), SIGKILL);
  if (pass(&stops, name)) kill(getpid(), SIGTERM); /* told at the loop's next turn, as an operator's stop is */
}

int fault_point(const char *name) { return pass(&faults, name); }

void fault_reset(void) { faults.n = -1; }
