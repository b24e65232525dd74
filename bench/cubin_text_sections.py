#!/usr/bin/env python3
"""Prints one line per kernel code section (.text.<mangled name>) of the cubins embedded in a CUDA object file:
the cubin's architecture, the sha1 of the section's bytes and its name. Two builds' outputs compared with diff
show which kernels' machine code changed (no cuobjdump needed: the fatbin's cubins are plain, uncompressed ELF
files, as nvcc 13 writes them here; compressed entries are skipped, so check the counts).
Usage: cubin_text_sections.py OBJECT.o [--arch sm_90a]
Example: python3 bench/cubin_text_sections.py build-cuda/CMakeFiles/kl_kernels.dir/kernels/rungs/X.sm90a.cu.o"""
import hashlib
import struct
import subprocess
import sys
import tempfile


def fatbin_of(obj):
    with tempfile.NamedTemporaryFile() as f:
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, f.name], check=True)
        return open(f.name, "rb").read()


def cubins(fatbin):
    """(arch, elf bytes) of every uncompressed ELF entry in each fatbin container."""
    pos = 0
    while pos + 16 <= len(fatbin):
        magic, _, hsize, size = struct.unpack_from("<IHHQ", fatbin, pos)
        if magic != 0xBA55ED50:
            break
        off, end = pos + hsize, pos + hsize + size
        while off < end:
            kind, _, ehsize, psize = struct.unpack_from("<HHIQ", fatbin, off)
            arch = struct.unpack_from("<I", fatbin, off + 28)[0]
            flags = struct.unpack_from("<Q", fatbin, off + 40)[0]
            payload = fatbin[off + ehsize: off + ehsize + psize]
            if kind == 2 and payload[:4] == b"\x7fELF":
                yield arch, bool(flags & 0x100000), payload
            off += ehsize + psize
        pos = end


def text_sections(elf):
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    def sh(i):
        return struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize)
    strtab = sh(shstrndx)
    names = elf[strtab[4]: strtab[4] + strtab[5]]
    for i in range(shnum):
        name_off, _, _, _, off, size = sh(i)[:6]
        name = names[name_off: names.index(b"\0", name_off)].decode()
        if name.startswith(".text."):
            yield name, elf[off: off + size]


def main():
    obj = sys.argv[1]
    want = sys.argv[sys.argv.index("--arch") + 1] if "--arch" in sys.argv else None
    for arch, a_variant, elf in cubins(fatbin_of(obj)):
        label = "sm_%d%s" % (arch, "a" if a_variant else "")
        if want and label != want:
            continue
        for name, data in sorted(text_sections(elf)):
            print(label, hashlib.sha1(data).hexdigest(), name)


if __name__ == "__main__":
    main()
