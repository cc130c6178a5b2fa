/* cli: the engine command line (see cli_main). */
#ifndef ENGINE_CLI_H
#define ENGINE_CLI_H

int cli_main(int argc, char **argv);

#endif
