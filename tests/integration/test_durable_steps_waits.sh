#!/usr/bin/env bash
# A step never acts on an unrecorded result, with a timer and with a signal
# between steps: kill -9 at every crash point, then resume in a fresh
# process (the checks: test_durable_steps.sh, durable_steps.sh).
source "$(dirname "$0")/lib.sh"
DURABLE_SHAPES="timer signal"
source "$(dirname "$0")/durable_steps.sh"
finish
