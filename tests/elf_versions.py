"""A small ELF reader for the glibc floor checks: which shared libraries a library needs
(DT_NEEDED) and which symbol versions it needs from each (the GNU version-needed section,
`.gnu.version_r`, what `objdump -T` prints as GLIBC_2.xx). Standard library only, so the
check runs anywhere the tests do; ELF32/ELF64, either byte order (x86_64 and aarch64 wheels)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Set, Tuple

SHT_DYNAMIC = 6
SHT_GNU_VERNEED = 0x6FFFFFFE
DT_NULL = 0
DT_NEEDED = 1
EM_X86_64 = 62
EM_AARCH64 = 183
MACHINES = {EM_X86_64: "x86_64", EM_AARCH64: "aarch64"}


@dataclass
class ElfDeps:
    machine: str
    needed: List[str] = field(default_factory=list)  # DT_NEEDED, in order
    versions: Dict[str, Set[str]] = field(default_factory=dict)  # library -> versions needed from it

    def glibc_versions(self) -> List[Tuple[int, ...]]:
        """Every GLIBC_x.y[.z] version needed from any library, as sorted tuples."""
        found = set()
        for names in self.versions.values():
            for name in names:
                if name.startswith("GLIBC_") and name[6:].replace(".", "").isdigit():
                    found.add(tuple(int(p) for p in name[6:].split(".")))
        return sorted(found)

    def max_glibc(self) -> Tuple[int, ...]:
        versions = self.glibc_versions()
        return versions[-1] if versions else ()


def _cstr(table: bytes, offset: int) -> str:
    end = table.index(b"\0", offset)
    return table[offset:end].decode("ascii")


def read(path: Path) -> ElfDeps:
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        raise ValueError(f"{path} is not an ELF file")
    is64 = {1: False, 2: True}[data[4]]
    order = {1: "<", 2: ">"}[data[5]]
    if is64:
        e_machine, = struct.unpack_from(order + "H", data, 18)
        e_shoff, = struct.unpack_from(order + "Q", data, 40)
        e_shentsize, e_shnum = struct.unpack_from(order + "HH", data, 58)
        sh_fmt, dyn_fmt = order + "IIQQQQIIQQ", order + "qQ"
    else:
        e_machine, = struct.unpack_from(order + "H", data, 18)
        e_shoff, = struct.unpack_from(order + "I", data, 32)
        e_shentsize, e_shnum = struct.unpack_from(order + "HH", data, 46)
        sh_fmt, dyn_fmt = order + "IIIIIIIIII", order + "iI"
    sections = []
    for i in range(e_shnum):
        (_name, sh_type, _flags, _addr, sh_offset, sh_size, sh_link, sh_info, _align, _entsize) = struct.unpack_from(
            sh_fmt, data, e_shoff + i * e_shentsize
        )
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_info))

    def strtab(index: int) -> bytes:
        _, off, size, _, _ = sections[index]
        return data[off : off + size]

    deps = ElfDeps(machine=MACHINES.get(e_machine, f"machine {e_machine}"))
    for sh_type, off, size, link, info in sections:
        if sh_type == SHT_DYNAMIC:
            strings = strtab(link)
            step = struct.calcsize(dyn_fmt)
            for pos in range(off, off + size, step):
                tag, val = struct.unpack_from(dyn_fmt, data, pos)
                if tag == DT_NULL:
                    break
                if tag == DT_NEEDED:
                    deps.needed.append(_cstr(strings, val))
        elif sh_type == SHT_GNU_VERNEED:
            strings = strtab(link)
            pos = off
            for _ in range(info):  # sh_info: the number of Verneed entries
                _version, cnt, file_, aux, nxt = struct.unpack_from(order + "HHIII", data, pos)
                names = deps.versions.setdefault(_cstr(strings, file_), set())
                apos = pos + aux
                for _ in range(cnt):
                    _hash, _flags, _other, name, anext = struct.unpack_from(order + "IHHII", data, apos)
                    names.add(_cstr(strings, name))
                    apos += anext
                if nxt == 0:
                    break
                pos += nxt
    return deps


def parse_floor(text: str) -> Tuple[int, ...]:
    return tuple(int(p) for p in text.strip().split("."))
