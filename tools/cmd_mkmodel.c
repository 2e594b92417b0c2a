/*
 * cmd_mkmodel.c — `hetrun mkmodel`: write a random-weight model.
 */
#include "tools/hetrun.h"

int cmd_mkmodel(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "mkmodel", "-o --arch --preset --vocab --type --output-type --n-layer --n-embd --n-head "
                                 "--n-head-kv --head-dim --n-ff --tied -c --seed", argc, argv)) return 2;
    hr_error(&o, "not implemented yet");
    return 1;
}
