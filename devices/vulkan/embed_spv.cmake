# Turn a SPIR-V binary into a C header holding it as a uint32_t array, so the
# shaders are embedded in libhet and nothing is looked up at run time.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR nwords "${n} / 8")
string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])" "0x\\4\\3\\2\\1," words "${hex}")
file(WRITE ${OUT} "/* generated from ${IN}; do not edit */\n#include <stdint.h>\nstatic const uint32_t ${NAME}[${nwords}] = {${words}};\n")
