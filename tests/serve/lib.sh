# lib.sh — sourced by tests/test_serve_*.sh: start `hetrun serve` on a free
# loopback port (--port 0; the port is read from its "listening on" line),
# stop it, and find node and the openai npm client.
hetrun="${HET_HETRUN:?HET_HETRUN must name the hetrun binary}"
src="${HET_SOURCE_DIR:-.}"
model="$src/models/stories260K.gguf"
export OMP_WAIT_POLICY=passive   # 2 shared cores: do not spin

# start_server LOG ARGS...: sets SERVER_PID and PORT
start_server() {
    local log="$1"; shift
    "$hetrun" serve --port 0 "$@" 2>"$log" &
    SERVER_PID=$!
    PORT=""
    for _ in $(seq 1 600); do
        PORT=$(sed -n 's|.*listening on http://[^ ]*:\([0-9][0-9]*\)$|\1|p' "$log" | head -1)
        [ -n "$PORT" ] && return 0
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            echo "hetrun serve exited during start-up:"; sed 's/^/    /' "$log"; return 1
        fi
        sleep 0.1
    done
    echo "hetrun serve did not start within 60 s"; return 1
}

# stop_server: SIGTERM, and the exit status of the server
stop_server() {
    [ -n "${SERVER_PID:-}" ] || return 0
    kill -TERM "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID"; local rc=$?
    SERVER_PID=""
    return $rc
}

# need_node: exit 77 (skip) when node is missing
need_node() {
    if ! command -v node >/dev/null 2>&1; then
        echo "SKIP: node is not installed (the serve tests drive the server from Node.js)"; exit 77
    fi
}

# need_openai: install the openai npm client into the build tree once; a
# failure is an error, not a skip (CI must be able to run this test). Two
# serve tests may start at once (ctest -j): the check and the install hold
# a lock, or the second npm rewrites the package under the first test
# (seen: "Cannot find module './messages.js'" under ASan).
need_openai() {
    local dir; dir="$(dirname "$hetrun")/node"
    mkdir -p "$dir"
    exec 9>"$dir.lock"
    flock 9
    if [ ! -f "$dir/node_modules/openai/package.json" ]; then
        if ! command -v npm >/dev/null 2>&1; then
            echo "FAIL: npm is missing: cannot install the openai client (npm install --prefix $dir openai@4)"; exit 1
        fi
        if ! npm install --prefix "$dir" --no-audit --no-fund --loglevel=error openai@4 >"$dir.log" 2>&1; then
            echo "FAIL: 'npm install --prefix $dir openai@4' failed; is the npm registry reachable?"
            sed 's/^/    /' "$dir.log" | tail -20; exit 1
        fi
    fi
    flock -u 9
    exec 9>&-
    export NODE_PATH="$dir/node_modules"
}
