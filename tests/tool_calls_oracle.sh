#!/usr/bin/env bash
# Oracle test for the tool-call parser: tests/chat/tool_call_fixtures.py renders
# assistant turns with tool calls from every shared chat template with Python's
# jinja2, then test_tool_calls parses each back (whole and streamed at every
# byte) and compares with the message that was rendered.
# usage: tool_calls_oracle.sh TEST_TOOL_CALLS SHARED_DIR BUILD_DIR
set -u
bin=$1 shared=$2 build=$3
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$shared/templates" ]; then
  echo "SKIPPED: $shared/templates is absent"; exit 0
fi
if ! /usr/bin/python3 -c 'import jinja2' 2>/dev/null; then
  echo "SKIPPED: /usr/bin/python3 has no jinja2 (Debian package python3-jinja2)"; exit 0
fi
out=$build/tool_call_fixtures
rm -rf "$out"
/usr/bin/python3 "$here/chat/tool_call_fixtures.py" "$out" "$shared"/templates/*.jinja || exit 1
QKV_TOOL_CALL_FIXTURES=$out exec "$bin" --test-case='oracle fixtures*' --success=false
