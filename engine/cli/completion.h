/* completion: shell completion for the CLI.
 *
 * `engine completion bash|zsh` prints a script to source (or to install where
 * bash-completion or zsh's fpath finds it): completion/engine.bash and
 * completion/_engine, built into the binary (CMakeLists.txt). The scripts
 * know the commands and their options; for what only the database knows
 * (workflow ids, token names, what a workflow waits on) they run the hidden
 * `engine __complete WHAT ...`, which prints candidates one per line. */
#ifndef ENGINE_COMPLETION_H
#define ENGINE_COMPLETION_H

/* engine completion SHELL: argv[0] is the first argument after the command.
 * Returns the exit code (0, or 2 for an unknown shell). */
int completion_script(int argc, char **argv);

/* engine __complete WHAT [--db PATH] ...: candidates on stdout, and never a
 * word on stderr, since the shell would show it in the middle of the line
 * being typed. Opens the database read-only, waits for no lock, prints
 * nothing and exits 1 on any error (no database, a bad argument). */
int completion_query(int argc, char **argv);

#endif
