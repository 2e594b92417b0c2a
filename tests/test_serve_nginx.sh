#!/usr/bin/env bash
# test_serve_nginx.sh — two `hetrun serve` replicas behind nginx, as
# docs/serve.md configures it (least_conn, passive health checks with
# max_fails/fail_timeout, proxy_next_upstream, X-Session-Id affinity), driven
# with the official openai client (serve/nginx.js); one replica is killed
# mid-run and every request must still end cleanly within a bounded time.
# Needs nginx (scripts/deps.sh installs Debian's); skips (77) without it or
# without node.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/serve/lib.sh"
need_node
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
if [ ! -x "$nginx_bin" ]; then
    echo "SKIP: nginx is not installed (apt-get install nginx; scripts/deps.sh lists it)"; exit 77
fi
need_openai
tmp="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT

start_server "$tmp/a.log" -m "$model" -t 1 --parallel 2 || exit 1
pid_a=$SERVER_PID port_a=$PORT; pids+=("$pid_a")
start_server "$tmp/b.log" -m "$model" -t 1 --parallel 2 || exit 1
pid_b=$SERVER_PID port_b=$PORT; pids+=("$pid_b")
SERVER_PID=""

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
nport=$(free_port)
mkdir -p "$tmp/nginx"
# the configuration docs/serve.md shows, with the test's ports and paths
cat >"$tmp/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 256; }
http {
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path       $tmp/nginx/proxy;
    fastcgi_temp_path     $tmp/nginx/fastcgi;
    uwsgi_temp_path       $tmp/nginx/uwsgi;
    scgi_temp_path        $tmp/nginx/scgi;
    log_format het '\$request_method \$uri \$status upstream=\$upstream_addr upstream_status=\$upstream_status';
    access_log $tmp/nginx/access.log het;

    upstream het {
        least_conn;
        server 127.0.0.1:$port_a max_fails=1 fail_timeout=10s;
        server 127.0.0.1:$port_b max_fails=1 fail_timeout=10s;
        keepalive 16;
    }
    upstream het_session {
        hash \$http_x_session_id consistent;
        server 127.0.0.1:$port_a max_fails=1 fail_timeout=10s;
        server 127.0.0.1:$port_b max_fails=1 fail_timeout=10s;
        keepalive 16;
    }
    map \$http_x_session_id \$het_pool {
        ""      het;
        default het_session;
    }
    server {
        listen 127.0.0.1:$nport;
        location / {
            proxy_pass http://\$het_pool;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_connect_timeout 2s;
            proxy_read_timeout 60s;
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_tries 2;
            proxy_next_upstream_timeout 10s;
            add_header X-Upstream \$upstream_addr always;
        }
    }
}
CONF
"$nginx_bin" -t -c "$tmp/nginx.conf" -p "$tmp/nginx" >"$tmp/nginx-t.log" 2>&1 \
    || { echo "FAIL: nginx rejects the configuration:"; sed 's/^/    /' "$tmp/nginx-t.log"; exit 1; }
"$nginx_bin" -c "$tmp/nginx.conf" -p "$tmp/nginx" 2>>"$tmp/nginx/error.log" &
pids+=($!)
# get URL: the body, or rc 1 (node's fetch; curl may not be installed)
get() { node -e 'fetch(process.argv[1]).then(async (r) => { console.log(await r.text()); process.exit(r.ok ? 0 : 1); }, () => process.exit(1))' "$1"; }
for _ in $(seq 1 100); do get "http://127.0.0.1:$nport/health" >/dev/null && break; sleep 0.1; done

rc=0
NGINX_PORT=$nport VICTIM_PID=$pid_a VICTIM_PORT=$port_a NGINX_LOG="$tmp/nginx/access.log" \
    timeout 120 node "$here/serve/nginx.js" || { rc=1; echo "nginx error log:"; tail -5 "$tmp/nginx/error.log"; }
wait "$pid_a" 2>/dev/null
# the survivor still answers and exits cleanly
get "http://127.0.0.1:$port_b/health" | grep -q '"status":"ok"' || { echo "FAIL: the survivor's /health"; rc=1; }
kill -TERM "$pid_b"; wait "$pid_b" || { echo "FAIL: the survivor did not exit cleanly"; rc=1; }
exit $rc
