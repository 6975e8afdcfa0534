#!/usr/bin/env bash
# Renders an `hpcrl report` page in headless Chromium and checks that the
# picture is not blank: the unit tests (report_test.cpp) prove the HTML is
# well-formed and complete, this proves a browser draws it (inline SVG and CSS,
# no network). The PNG is decoded with plain python3 (zlib), no PIL.
#
#   tests/trace/report_render_check.sh REPORT.html [OUT.png]
#
# Exit 0: rendered with enough colours and enough drawn pixels; 1: blank or
# failed; 77: no chromium on this machine (CTest: SKIP_RETURN_CODE 77).
# WINDOW_HEIGHT (default 2000) makes a taller screenshot of a longer page;
# MIN_COLOURS, MIN_DRAWN_SHARE, MIN_COLOURED_SHARE override the thresholds below.
# Debian: apt-get install -y chromium python3 (chromium brings fonts-liberation).
set -euo pipefail

html=${1:?usage: report_render_check.sh REPORT.html [OUT.png]}
out=${2:-${html%.html}.png}
# A coloured page needs many colours (anti-aliased text, the palette); a blank
# or error page has a handful. Drawn pixels: not white, at least this share;
# saturated pixels (the charts' colours, never text): at least this share.
min_colours=${MIN_COLOURS:-64}
min_drawn=${MIN_DRAWN_SHARE:-0.02}
min_coloured=${MIN_COLOURED_SHARE:-0.005}

browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $browser ]]; then
  echo "report_render_check: no chromium found; skipped (apt-get install -y chromium)" >&2
  exit 77
fi
[[ -f $html ]] || { echo "report_render_check: $html not found" >&2; exit 1; }

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
url="file://$(cd "$(dirname "$html")" && pwd)/$(basename "$html")"
rm -f "$out"
# Everything that could reach the network or a desktop session is off: the page
# must stand alone.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
  --user-data-dir="$profile" --screenshot="$out" --window-size=1200,${WINDOW_HEIGHT:-2000} "$url" >/dev/null 2>&1 || true
[[ -s $out ]] || { echo "report_render_check: chromium wrote no screenshot for $url" >&2; exit 1; }

python3 - "$out" "$min_colours" "$min_drawn" "$min_coloured" <<'PY'
import struct, sys, zlib

path, min_colours, min_drawn, min_coloured = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
data = open(path, 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
pos, idat = 8, b''
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b'IHDR':
        width, height, depth, ctype = struct.unpack('>IIBB', body[:10])
    elif kind == b'IDAT':
        idat += body
    pos += 12 + n
assert depth == 8 and ctype in (2, 6), f'unexpected PNG format depth={depth} colour type={ctype}'
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), width * bpp
prev, colours, drawn, coloured = bytearray(stride), set(), 0, 0
for y in range(height):
    f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):  # undo the PNG row filter
        a = row[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: row[i] = (row[i] + a) & 255
        elif f == 2: row[i] = (row[i] + b) & 255
        elif f == 3: row[i] = (row[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        r, g, b = row[x], row[x + 1], row[x + 2]
        colours.add((r, g, b))
        if r < 245 or g < 245 or b < 245: drawn += 1
        if max(r, g, b) - min(r, g, b) > 60: coloured += 1
    prev = row
total = width * height
print(f'{path}: {width}x{height}, {len(colours)} colours, {drawn / total:.1%} drawn, {coloured / total:.1%} coloured')
ok = len(colours) >= min_colours and drawn / total >= min_drawn and coloured / total >= min_coloured
if not ok:
    print(f'blank or uncoloured render (need >= {min_colours} colours, {min_drawn:.1%} drawn, {min_coloured:.1%} coloured)')
sys.exit(0 if ok else 1)
PY
