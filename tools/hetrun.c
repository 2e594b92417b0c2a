/*
 * hetrun.c — the command-line entry point: dispatches to subcommands.
 */
#include "tools/hetrun.h"

#include "het/session.h"

#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    { "run",      cmd_run,      "generate text from a prompt" },
    { "logits",   cmd_logits,   "evaluate a prompt and write every position's logits" },
    { "tokenize", cmd_tokenize, "print the token ids of a text" },
    { "info",     cmd_info,     "print a GGUF file's metadata, hyperparameters and tensors" },
    { "bench",    cmd_bench,    "measure prefill and decode tokens/s" },
    { "mkmodel",  cmd_mkmodel,  "write a random-weight model of a real architecture and shape" },
    { "devices",  cmd_devices,  "list the devices het can use" },
    { "plan",     cmd_plan,     "show where each node of a graph runs and why" },
    { "calibrate", cmd_calibrate, "measure each device into a cost profile" },
    { "serve",    cmd_serve,    "serve the model over HTTP (OpenAI-compatible API)" },
    { "chat",     cmd_chat,     "chat with the model on the terminal (its chat template)" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: hetrun <command> [options]   (hetrun <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nWith no command, 'hetrun' is 'hetrun run' on the bundled model.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            usage(stdout);
            return 0;
        }
        if (argc >= 2 && !strcmp(argv[1], "--version")) {
            printf("hetrun %s (libhet %s)\n", HET_VERSION, het_version());
            return 0;
        }
        return cmd_run(argc, argv); /* flags only: run */
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "hetrun: unknown command '%s' (see hetrun --help)\n", argv[1]);
    return 2;
}
