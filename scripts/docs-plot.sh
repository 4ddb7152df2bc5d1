#!/usr/bin/env bash
# Regenerates docs/img/decode-h200.png, the README's picture: reports/plot.py's latency chart of the committed H200
# decode results (reports/h200-2026-12-05/decode.json), bf16 rows only so that the chart is one panel.
# Needs matplotlib (Debian: python3-matplotlib); PYTHON picks the interpreter (default: python3, else /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-python3}"
"$py" -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
src=reports/h200-2026-12-05/decode.json
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" - "$src" "$tmp/decode.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["rows"] = [r for r in doc["rows"] if r["dtype"] == "bf16"]
json.dump(doc, open(sys.argv[2], "w"))
PY
"$py" reports/plot.py "$tmp/decode.json" -o "$tmp/out" >/dev/null
cp "$tmp/out/decode_latency.png" docs/img/decode-h200.png
echo "wrote docs/img/decode-h200.png from $src"
