/* foreground: a start that finds no worker runs the workflow in this
 * process: the engine for the database (every workflow of it, not only this
 * one), with what the session does now on stderr (progress.h). Local only:
 * client_local.c's run_here. */
#ifndef ENGINE_FOREGROUND_H
#define ENGINE_FOREGROUND_H

#include <stddef.h>

#include "client_ops.h"

/* Creates run->id from run->script with input and trace (NULL: none; what
 * its WorkflowStarted records of the caller's trace) or finds it, and runs
 * it, the caller holding the worker lock of db, until it ends, is stuck or
 * the process is interrupted; then hands its summary to run->report, whose
 * exit code goes to *code. 0, or -1 with err (nothing reported). */
int foreground_run(const char *db, const client_run *run, const char *input, const trace_start *trace, int *code,
                   char *err, size_t errlen);

#endif
