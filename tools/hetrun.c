/*
 * hetrun.c — the command-line entry point: dispatches to subcommands.
 */
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argc; (void)argv;
    fprintf(stderr, "hetrun: not built yet\n");
    return 1;
}
