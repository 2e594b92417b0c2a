# cli_harness.sh — sourced by the shell tests (not a test itself): pass/fail
# counters, ok / bad / check, and finish, which prints the tally and fails
# when any check failed.
#   check "what" COMMAND ARGS...   counts COMMAND's success, names what failed
#   cmp_logits A B TOL [MIN_ROWS]  two `hetrun logits -o` files agree: same
#     shape (at least MIN_ROWS positions), same argmax per position, and
#     max |A - B| / max |A| per position <= TOL; prints the worst difference
pass=0; fail=0
ok()  { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
check() { local what="$1"; shift; if "$@"; then ok; else bad "$what"; fi; }
finish() { echo "${1:+$1: }$pass passed, $fail failed"; [ "$fail" = 0 ]; }
cmp_logits() {
    python3 - "$1" "$2" "$3" "${4:-1}" <<'PY'
import struct, sys, array
def rd(p):
    f = open(p, 'rb'); n, v = struct.unpack('<ii', f.read(8)); f.read(4 * n)
    a = array.array('f'); a.frombytes(f.read(4 * n * v)); return n, v, a
n, v, a = rd(sys.argv[1]); m, w, b = rd(sys.argv[2]); tol = float(sys.argv[3])
assert (n, v) == (m, w) and n >= int(sys.argv[4]), "shapes differ"
worst = 0.0
for t in range(n):
    ra, rb = a[t*v:(t+1)*v], b[t*v:(t+1)*v]
    if max(range(v), key=ra.__getitem__) != max(range(v), key=rb.__getitem__): sys.exit("argmax differs at %d" % t)
    worst = max(worst, max(abs(x - y) for x, y in zip(ra, rb)) / max(abs(x) for x in ra))
print("max rel diff %.2e" % worst)
sys.exit(0 if worst <= tol else 1)
PY
}
