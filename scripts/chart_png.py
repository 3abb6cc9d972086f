#!/usr/bin/env python3
"""Renders an hcpsim SVG chart to a small PNG for the documentation: rsvg-convert (Debian librsvg2-bin) at the
given width, then flattened on white and stored with a palette of the 256 colours that fill the most flat area
(the charts' fills, lines and text colours); the other (anti-aliased edge) pixels take the nearest palette colour.
Standard library only.

Usage: chart_png.py CHART.svg OUT.png [--width PX]      (default width 1000)
       chart_png.py --ink RENDERED.png BAND_PX             (the tests: ink extent of each horizontal band)
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile
import zlib

def read_png(data):
    """(width, height, rows of RGB bytes flattened on white) of an 8-bit RGB or RGBA PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
    if depth != 8 or color not in (2, 6):
        raise ValueError("expected an 8-bit RGB or RGBA PNG")
    bpp = 4 if color == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev, p = [], bytearray(stride), 0
    for _ in range(height):
        f, line = raw[p], bytearray(raw[p + 1:p + 1 + stride])
        p += 1 + stride
        for i in range(stride):  # undo the PNG filter of the row (PNG spec §9)
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        out = bytearray()
        for i in range(0, stride, bpp):
            alpha = line[i + 3] if bpp == 4 else 255
            for k in range(3):
                out.append((line[i + k] * alpha + 255 * (255 - alpha)) // 255)
        rows.append(out)
    return width, height, rows


def write_png(path, width, height, rows):
    # A colour's weight: its pixels that continue a flat area or a line (same colour right or below), so that a small
    # legend swatch or a thin dashed line outranks the many anti-aliased shades of text edges.
    counts = {}
    for y, row in enumerate(rows):
        below = rows[y + 1] if y + 1 < height else row
        for i in range(0, len(row), 3):
            c = bytes(row[i:i + 3])
            flat = (i + 3 < len(row) and row[i:i + 3] == row[i + 3:i + 6]) or (y + 1 < height and row[i:i + 3] == below[i:i + 3])
            counts[c] = counts.get(c, 0) + (1 if flat else 0)
    palette = sorted(counts, key=lambda c: (-counts[c], c))[:256]
    index = {c: n for n, c in enumerate(palette)}
    for c in counts:
        if c not in index:
            index[c] = min(range(len(palette)), key=lambda n: sum((x - y) ** 2 for x, y in zip(c, palette[n])))
    body = bytearray()
    for row in rows:
        body.append(0)
        body += bytes(index[bytes(row[i:i + 3])] for i in range(0, len(row), 3))
    header = struct.pack(">IIBBBBB", width, height, 8, 3, 0, 0, 0)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"PLTE", b"".join(palette))
    png += chunk(b"IDAT", zlib.compress(bytes(body), 9)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def print_ink_bands(path, band):
    """One line "band x0 x1 y0 y1" (inclusive pixel bounds of the non-white pixels) per band of `band` rows with ink;
    the tests lay one text out per band and compare its rendered extent with the charts' estimate."""
    with open(path, "rb") as f:
        width, height, rows = read_png(f.read())
    ink = {}
    for y, row in enumerate(rows):
        xs = [i // 3 for i in range(0, len(row), 3) if min(row[i:i + 3]) < 224]
        if xs:
            b = ink.setdefault(y // band, [xs[0], xs[-1], y, y])
            b[0], b[1], b[3] = min(b[0], xs[0]), max(b[1], xs[-1]), y
    for b in sorted(ink):
        print(b, *ink[b])


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--ink":
        print_ink_bands(sys.argv[2], int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("svg")
    ap.add_argument("png")
    ap.add_argument("--width", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, "full.png")
        try:
            subprocess.run(["rsvg-convert", "-w", str(args.width), "-o", full, args.svg], check=True)
        except FileNotFoundError:
            sys.exit("chart_png.py: rsvg-convert is not installed (Debian: apt-get install librsvg2-bin)")
        with open(full, "rb") as f:
            write_png(args.png, *read_png(f.read()))
    print(f"wrote {args.png} ({os.path.getsize(args.png)} bytes)")


if __name__ == "__main__":
    main()
