#!/usr/bin/env bash
# A newcomer's first steps in a checkout that others cannot traverse (a clone inside a mode-700
# home directory, run as root): `npm ci`, one end-to-end test file, and `npm start` up to
# /readyz. Checks that no folder outside the clone changed its permissions.
#
# Usage: bash test/newcomer/mode-700.sh [git-url-or-path] [branch]   (default: this checkout, HEAD)
set -euo pipefail
SRC="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
BRANCH="${2:-$(git -C "$SRC" rev-parse --abbrev-ref HEAD)}"
HOME700="$(mktemp -d /tmp/tally-home-XXXXXX)" # mktemp -d creates it with mode 700
trap 'node "$HOME700/tally/src/database/embedded-pg.mjs" destroy "$HOME700/tally/.data" >/dev/null 2>&1 || true; rm -rf "$HOME700"' EXIT
modes() { for d in "$HOME700" /tmp /; do stat -c '%a %n' "$d"; done; }
before="$(modes)"
git clone -q --branch "$BRANCH" "$SRC" "$HOME700/tally"
cd "$HOME700/tally"
npm ci --no-audit --no-fund --loglevel=warn
npx jest test/embedded.e2e-spec.ts
PORT="$(node -e 'const s=require("net").createServer().listen(0,()=>{console.log(s.address().port);s.close()})')"
EMBEDDED_PG_PORT="$(node -e 'const s=require("net").createServer().listen(0,()=>{console.log(s.address().port);s.close()})')"
# Its own process group, so that npm, the shell and the server stop together.
PORT=$PORT EMBEDDED_PG_PORT=$EMBEDDED_PG_PORT setsid npm start >"$HOME700/start.log" 2>&1 &
server=$!
for _ in $(seq 1 240); do
  if curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then break; fi
  sleep 1
done
status="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")"
kill -TERM -- "-$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true
after="$(modes)"
echo "readyz: $status"
echo "modes before: $(echo $before)"
echo "modes after:  $(echo $after)"
[ "$status" = 200 ] && [ "$before" = "$after" ] && echo "mode-700 newcomer check: PASS" || { echo "mode-700 newcomer check: FAIL"; tail -20 "$HOME700/start.log"; exit 1; }
