#!/usr/bin/env bash
# qkv chat in a terminal (tmux): the prompt shows, a typed message gets the
# reply `qkv run --chat` gives, Ctrl-C during a long reply brings the prompt
# back with the program alive, Ctrl-C at the prompt quits, and /exit quits.
# usage: chat_tty.sh QKV SHARED_DIR
set -u
qkv=$1 shared=$2
here=$(cd "$(dirname "$0")" && pwd)
model=$shared/models/tinystories-3M-F16.gguf
template=$here/turns.jinja
if [ ! -f "$model" ]; then echo "SKIPPED: $model is absent"; exit 0; fi
if ! command -v tmux >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q tmux >/dev/null 2>&1 || true
fi
if ! command -v tmux >/dev/null 2>&1; then echo "SKIPPED: tmux is absent and could not be installed"; exit 0; fi

# One tmux server per run of qkv chat (a fresh socket each: no race with a server still exiting).
run=0
sock=qkv-chat-test-$$-$run
tm() { tmux -L "$sock" "$@"; }
trap 'tm kill-server 2>/dev/null' EXIT
fails=0
check() {  # check CONDITION-EXIT-STATUS MESSAGE
  if [ "$1" -eq 0 ]; then echo "ok   $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi
}
pane() { tm capture-pane -p -J -S -200 -t chat 2>/dev/null; }
# wait_for PATTERN [SECONDS]: until the pane matches the extended regex.
wait_for() {
  local deadline=$((SECONDS + ${2:-20}))
  while [ $SECONDS -lt $deadline ]; do
    pane | grep -Eq -- "$1" && return 0
    sleep 0.1
  done
  echo "--- pane (waiting for /$1/):"; pane; return 1
}
# wait_prompts N [SECONDS]: until N prompts ("> " lines) have shown, the last one empty.
wait_prompts() {
  local deadline=$((SECONDS + ${2:-20}))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(pane | grep -c '^> ')" -ge "$1" ] && pane | grep -Eq '^> $' && return 0
    sleep 0.1
  done
  echo "--- pane (waiting for $1 prompts):"; pane; return 1
}
start() {  # start ARGS...: qkv chat in a fresh pane; its exit code is printed when it ends
  tm kill-server 2>/dev/null
  run=$((run + 1)); sock=qkv-chat-test-$$-$run
  tm new-session -d -s chat -x 160 -y 50 \
    "$qkv chat -m $model --chat-template $template --temp 0 -t 2 $*; echo QKV_EXIT=\$?; sleep 60"
}

message="Tell me a story about a cat."
reply=$("$qkv" run -m "$model" --chat --chat-template "$template" --temp 0 -n 16 -c 512 -t 2 -q -p "$message")

start -n 16 -c 512
wait_for '^> $'; check $? "the prompt shows"
tm send-keys -t chat "$message" Enter
wait_prompts 2 30; check $? "the prompt returns after the reply"
pane | grep -Fq -- "${reply:1:40}"; check $? "the reply is qkv run --chat's ('${reply:1:40}')"

# A long reply (up to 30000 positions), stopped by Ctrl-C once it streams.
start -n 30000 -c 30000
wait_for '^> $'; check $? "the prompt shows (long context)"
tm send-keys -t chat "$message" Enter
wait_for 'big' 30; check $? "the reply streams"
tm send-keys -t chat C-c
wait_for 'reply stopped \(Ctrl-C\)' 10; check $? "Ctrl-C stops the reply"
wait_prompts 2 10; check $? "the prompt returns after Ctrl-C"
pane | grep -q 'QKV_EXIT'; check $((1 - $?)) "the program is still running"
tm send-keys -t chat C-c
wait_for 'QKV_EXIT=0' 10; check $? "Ctrl-C at the prompt quits (exit 0)"

start -n 8 -c 512
wait_for '^> $'; check $? "the prompt shows (again)"
tm send-keys -t chat "/exit" Enter
wait_for 'QKV_EXIT=0' 10; check $? "/exit quits (exit 0)"

[ $fails -eq 0 ]
