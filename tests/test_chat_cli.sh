#!/usr/bin/env bash
# test_chat_cli.sh — `hetrun chat` scripted through a pipe: one user turn per
# input line, one reply per turn. Each reply must equal what `hetrun run
# --temp 0` continues the whole rendered conversation with (so the chat
# template, --system, the stored replies and the KV cache kept across turns
# are all checked); "/exit" ends the conversation, and so does the end of
# input without a final newline.
set -uo pipefail
hetrun="${HET_HETRUN:?}"
shared="${HET_SHARED_DIR:-../shared}"
src="${HET_SOURCE_DIR:-.}"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_harness.sh"
export OMP_WAIT_POLICY=passive

# continuation PROMPT N [STOP]: what `hetrun run --temp 0` adds to PROMPT, cut at STOP
continuation() {
    "$hetrun" run -m "$model" -t 1 --temp 0 -n "$2" -p "$1" >"$tmp/run.out" 2>"$tmp/run.err" \
        || { bad "run: $(cat "$tmp/run.err")"; return 1; }
    local out; out="$(cat "$tmp/run.out"; printf x)"; out="${out%x}"
    out="${out#"$1"}"; out="${out%$'\n'}"
    [ -n "${3:-}" ] && out="${out%%"$3"*}"
    REPLY_TEXT="$out"
}
# trimmed TEXT: without leading and trailing spaces and newlines (as chat stores a reply)
trimmed() {
    local t="$1"
    while [[ "$t" == [$' \n']* ]]; do t="${t:1}"; done
    while [[ "$t" == *[$' \n'] ]]; do t="${t%?}"; done
    printf '%s' "$t"
}

# 1. ChatML (qwen3-tiny carries a Qwen chat template): two turns with a system prompt
model="$shared/models/synthetic/qwen3-tiny-q8_0.gguf"
if [ -f "$model" ]; then
    sys="You answer briefly."; u1="Hello there"; u2="Tell me more"; n=12
    printf '%s\n%s\n' "$u1" "$u2" | "$hetrun" chat -m "$model" -t 1 --temp 0 -n $n --system "$sys" \
        >"$tmp/chat.out" 2>"$tmp/chat.err"
    check "chatml chat exits 0 ($(head -2 "$tmp/chat.err"))" test $? = 0
    p1="<|im_start|>system"$'\n'"$sys<|im_end|>"$'\n'"<|im_start|>user"$'\n'"$u1<|im_end|>"$'\n'"<|im_start|>assistant"$'\n'
    continuation "$p1" $n && r1="$REPLY_TEXT"
    p2="$p1$(trimmed "$r1")<|im_end|>"$'\n'"<|im_start|>user"$'\n'"$u2<|im_end|>"$'\n'"<|im_start|>assistant"$'\n'
    continuation "$p2" $n && r2="$REPLY_TEXT"
    printf '%s\n%s\n' "$r1" "$r2" >"$tmp/want.out"
    [ -n "$r1" ] && cmp -s "$tmp/chat.out" "$tmp/want.out" && ok \
        || bad "chatml: chat's replies differ from run on the rendered conversation: $(diff "$tmp/chat.out" "$tmp/want.out" | head -6)"
else
    echo "note: $model missing, ChatML not checked"
fi

# 2. a plain transcript (stories260K has no template): "\nUser:" ends a reply; --system leads it
model="$src/models/stories260K.gguf"
printf 'Once upon a time' | "$hetrun" chat -m "$model" -t 1 --temp 0 -n 40 --system "Lily was happy." \
    >"$tmp/plain.out" 2>"$tmp/plain.err"
check "plain chat exits 0 ($(head -2 "$tmp/plain.err"))" test $? = 0
continuation "Lily was happy."$'\n\n'"User: Once upon a time"$'\n'"Assistant:" 40 $'\nUser:' && r="$REPLY_TEXT"
printf '%s\n' "$r" >"$tmp/want.out"
[ -n "$r" ] && cmp -s "$tmp/plain.out" "$tmp/want.out" && ok \
    || bad "plain: $(diff "$tmp/plain.out" "$tmp/want.out" | head -6)"

# 3. /exit ends it: the turns after it are not answered; empty lines are skipped
printf 'Hi\n\n/exit\nNot answered\n' | "$hetrun" chat -m "$model" -t 1 --temp 0 -n 8 >"$tmp/exit.out" 2>"$tmp/exit.err"
check "/exit: rc 0" test $? = 0
check "/exit: one reply ($(wc -l <"$tmp/exit.out") lines)" test "$(wc -l <"$tmp/exit.out")" = 1
# 4. unknown flags are refused with one line
"$hetrun" chat --bogus >/dev/null 2>"$tmp/err"; rc=$?
check "chat --bogus: rc 2, one line" test "$rc" = 2 -a "$(wc -l <"$tmp/err")" = 1
finish
