#!/usr/bin/env python3
"""Screenshot of the real window: Xvfb's framebuffer (its -fbdir XWD file) cropped to a rectangle, as PNG.
Used on the GPU machine (its python3 has Pillow) for the README's window shots:
    bench/window_shot.py /tmp/xfb/Xvfb_screen0 out.png [X Y W H]
XWD layout: a big-endian header (its size at 0, width and height at 16 and 20, bytes per line at 48, colour
count at 76), the window name, 12 bytes per colour, then BGRX pixels."""
import struct
import sys

from PIL import Image


def main():
    src, dst = sys.argv[1], sys.argv[2]
    b = open(src, "rb").read()
    header, = struct.unpack(">I", b[0:4])
    w, h = struct.unpack(">II", b[16:24])
    bpl, = struct.unpack(">I", b[48:52])
    ncolors, = struct.unpack(">I", b[76:80])
    start = header + ncolors * 12
    img = Image.frombuffer("RGBX", (w, h), b[start:start + bpl * h], "raw", "BGRX", bpl, 1).convert("RGB")
    if len(sys.argv) == 7:
        x, y, cw, ch = map(int, sys.argv[3:7])
        img = img.crop((x, y, x + cw, y + ch))
    img.save(dst)
    print(f"wrote {dst} {img.size[0]}x{img.size[1]}")


if __name__ == "__main__":
    main()
