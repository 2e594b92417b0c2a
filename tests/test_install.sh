#!/usr/bin/env bash
# test_install.sh — the installed tree as a user of the library meets it:
# `cmake --install` into a temporary prefix gives hetrun, libhet (static and
# shared), the public headers, het.pc and the bundled model;
# examples/generate.c builds with cc and `pkg-config --cflags --libs het`
# against that prefix alone, and its greedy text on stories260K equals
# `hetrun run --temp 0`'s; `hetrun --version` names the headers' version.
set -uo pipefail
hetrun="${HET_HETRUN:?}"
src="${HET_SOURCE_DIR:-.}"
build="$(dirname "$hetrun")"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"
command -v pkg-config >/dev/null && command -v cc >/dev/null || { echo "no cc or pkg-config"; exit 77; }

prefix="$tmp/prefix"
if ! cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
    bad "cmake --install: $(tail -3 "$tmp/install.log")"; finish; exit 1
fi
libdir="$(dirname "$(find "$prefix" -name het.pc | head -1)")/.."
for f in bin/hetrun include/het/session.h include/het/chat.h include/het/version.h share/het/stories260K.gguf; do
    check "installed $f" test -f "$prefix/$f"
done
for f in libhet.a libhet.so; do check "installed $f" test -e "$libdir/$f"; done
check "libhet.a defines het_session_open" bash -c "nm '$libdir/libhet.a' 2>/dev/null | grep -q ' T het_session_open$'"

# the example, built against the installed tree only
export PKG_CONFIG_PATH="$libdir/pkgconfig"
flags="$(pkg-config --cflags --libs het)" || { bad "pkg-config het"; finish; exit 1; }
san=""; [ "${HET_TEST_SANITIZE:-0}" = 1 ] && san="-fsanitize=address,undefined"
# shellcheck disable=SC2086
if ! cc -std=c11 -Wall -Wextra -Werror $san "$src/examples/generate.c" $flags -o "$tmp/generate" 2>"$tmp/cc.err"; then
    bad "cc examples/generate.c \$(pkg-config --cflags --libs het): $(head -5 "$tmp/cc.err")"; finish; exit 1
fi
check "generate.c is under 60 lines" test "$(wc -l <"$src/examples/generate.c")" -lt 60
model="$src/models/stories260K.gguf"
LD_LIBRARY_PATH="$libdir" "$tmp/generate" "$model" "Once upon a time" >"$tmp/gen.out" 2>"$tmp/gen.err" \
    || bad "generate: $(cat "$tmp/gen.err")"
"$prefix/bin/hetrun" run -m "$model" -p "Once upon a time" --temp 0 >"$tmp/run.out" 2>"$tmp/run.err" \
    || bad "installed hetrun run: $(cat "$tmp/run.err")"
[ -s "$tmp/gen.out" ] && cmp -s "$tmp/gen.out" "$tmp/run.out" && ok \
    || bad "generate's text differs from hetrun run --temp 0's: $(diff "$tmp/gen.out" "$tmp/run.out" | head -4)"
LD_LIBRARY_PATH="$libdir" "$tmp/generate" >/dev/null 2>"$tmp/usage.err"; rc=$?
[ "$rc" = 2 ] && grep -q 'usage: generate MODEL PROMPT' "$tmp/usage.err" && ok || bad "generate without arguments: rc $rc, '$(cat "$tmp/usage.err")'"
# --version: the version in het/version.h, the library's too
want="$(sed -n 's/^#define HET_VERSION "\(.*\)"$/\1/p' "$prefix/include/het/version.h")"
got="$("$prefix/bin/hetrun" --version)"
[ -n "$want" ] && [ "$got" = "hetrun $want (libhet $want)" ] && ok || bad "--version: '$got', want version '$want'"
finish
