#!/usr/bin/python3
"""Checks that a PNG shows each of the given colours.

    png_colors.py IMAGE.png RRGGBB [RRGGBB ...]

Counts the pixels within a small distance of each colour (anti-aliasing
blends a thin line's edges) and exits 1, naming the colour, if any has fewer
than --min pixels (default 40: a few centimetres of a 1.5-pixel line). A
decoder of its own, with zlib alone: 8-bit RGB or RGBA, non-interlaced, as
Chromium's screenshots are.
"""

import argparse
import struct
import sys
import zlib


def read_png(path):
    """(width, height, channels, rows of bytes)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color_type, _, _, interlace = header
    if depth != 8 or color_type not in (2, 6) or interlace:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA, non-interlaced PNGs are read")
    channels = 3 if color_type == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("image")
    parser.add_argument("colors", nargs="+")
    parser.add_argument("--min", type=int, default=40)
    parser.add_argument("--tolerance", type=int, default=24)
    args = parser.parse_args()
    width, height, channels, rows = read_png(args.image)
    wanted = [tuple(int(c[i:i + 2], 16) for i in (0, 2, 4)) for c in args.colors]
    counts = [0] * len(wanted)
    for row in rows:
        for x in range(0, width * channels, channels):
            r, g, b = row[x], row[x + 1], row[x + 2]
            for k, (wr, wg, wb) in enumerate(wanted):
                if abs(r - wr) + abs(g - wg) + abs(b - wb) <= args.tolerance:
                    counts[k] += 1
    report = " ".join(f"#{c}={n}" for c, n in zip(args.colors, counts))
    print(f"png_colors: {width}x{height} {report}")
    missing = [c for c, n in zip(args.colors, counts) if n < args.min]
    if missing:
        print(f"png_colors: too few pixels of {', '.join('#' + c for c in missing)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
