# cli_harness.sh — sourced by the shell tests (not a test itself): pass/fail
# counters, ok / bad / check, and finish, which prints the tally and fails
# when any check failed.
#   check "what" COMMAND ARGS...   counts COMMAND's success, names what failed
pass=0; fail=0
ok()  { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
check() { local what="$1"; shift; if "$@"; then ok; else bad "$what"; fi; }
finish() { echo "${1:+$1: }$pass passed, $fail failed"; [ "$fail" = 0 ]; }
