"""The recording format's numbers and layouts, as ``c/recorder/nvtxrec_format.h`` specifies them.

The header is fed to the CFFI module's cdef (build_ffi.py), so its ``#define NVTXREC_* <integer>``
lines are constants of ``lib`` and its two structs are types of ``ffi``: the readers
(:mod:`nvtx_cffi.recorder`, the tracer) take every number from here and spell none of them again.

A payload type's name (the lower-case suffix of its ``NVTXREC_PT_*`` code) says how its bits read
(:data:`PAYLOAD_FORMATS`), so a type added to the header is read, converted and written out by the
tracer with no change here.

>>> KINDS[lib.NVTXREC_KIND_PUSH], PAYLOAD_TYPES[lib.NVTXREC_PT_INT32], BLOB_KINDS[lib.NVTXREC_BLOB_SCOPE]
('push', 'int32', 'scope')
>>> FILE_HEADER.format, CHUNK_HEADER.format, PAYLOAD_FORMATS["float"].format
('<8sIIIIIIQQQQIIQdQQQ', '<QIIQQ', '<f')
"""
from __future__ import annotations

import re
import struct
from typing import Callable, Dict, NamedTuple, Tuple, Union

from ._native import ffi, lib

__all__ = ["lib", "names", "MAGIC", "FILE_HEADER", "FILE_HEADER_FIELDS", "CHUNK_HEADER", "KINDS", "APIS",
           "DEFINITIONS", "RESOURCES", "BLOB_KINDS", "PAYLOAD_TYPES", "PAYLOAD_CODES", "PAYLOAD_FORMATS",
           "PAYLOAD_VALUES", "PayloadFormat", "payload_bits"]


def names(group: str) -> Dict[int, str]:
    """code -> name of the constants ``NVTXREC_<group>_<NAME>``: the lower-case ``NAME``."""
    prefix = f"NVTXREC_{group}_"
    return {getattr(lib, name): name[len(prefix):].lower() for name in dir(lib) if name.startswith(prefix)}


def _struct_of(ctype: str) -> Tuple[struct.Struct, Tuple[str, ...]]:
    """A header struct as a little-endian :class:`struct.Struct` and its field names, from ffi's
    layout of it (it must have no padding: the files hold it packed)."""
    letters = {"uint32_t": "I", "uint64_t": "Q", "double": "d"}
    fmt, offset = "<", 0
    fields = ffi.typeof(ctype).fields
    for name, field in fields:
        if field.offset != offset:
            msg = f"{ctype}.{name}: padding before it, the reader unpacks the header packed"
            raise AssertionError(msg)
        kind = field.type
        fmt += f"{kind.length}s" if kind.kind == "array" else letters[kind.cname]
        offset += ffi.sizeof(kind)
    return struct.Struct(fmt), tuple(name for name, _ in fields)


#: The file's first 8 bytes: "NVTXREC" and the format version (NVTXREC_MAGIC).
MAGIC = b"NVTXREC%d" % lib.NVTXREC_VERSION
FILE_HEADER, FILE_HEADER_FIELDS = _struct_of("struct nvtxrec_file_header")
CHUNK_HEADER, _ = _struct_of("struct nvtxrec_chunk_header")

#: head tag -> event kind ("push", ...); NVTXREC_API_* -> api ("ex", ...); data record tag ->
#: definition kind ("string", "thread_name", ...); RESOURCE_NAME aux -> resource ("cuda_device",
#: ...); BLOB aux -> blob kind ("schema", ...)
KINDS = names("KIND")
APIS = names("API")
DEFINITIONS = names("D")
RESOURCES = names("RES")
BLOB_KINDS = names("BLOB")


class PayloadFormat(NamedTuple):
    """How a payload type's bits read: the :mod:`struct` format of its value (little-endian, in the
    low bytes of the 64 payload bits) and whether it is a floating-point one."""

    format: str
    floating: bool

    @property
    def unsigned(self) -> bool:
        return self.format[-1] in "BHIQ"


#: payload type code -> its name ("uint64", ..., "ext", "unknown"); NVTXREC_PT_NONE is None
PAYLOAD_TYPES: Dict[int, str] = {code: name for code, name in names("PT").items() if code != lib.NVTXREC_PT_NONE}
#: name -> payload type code
PAYLOAD_CODES = {name: code for code, name in PAYLOAD_TYPES.items()}
_FLOATING = {"float": "f", "double": "d"}  # IEEE binary32, binary64
_INTEGER_LETTERS = {8: "b", 16: "h", 32: "i", 64: "q"}


def _value_format(name: str) -> PayloadFormat:
    if name in _FLOATING:
        return PayloadFormat("<" + _FLOATING[name], True)
    match = re.fullmatch(r"(u?)int(8|16|32|64)", name)
    if match is None:
        msg = f"NVTXREC_PT_{name.upper()}: name a value type UINT<n>, INT<n>, FLOAT or DOUBLE (nvtxrec_format.h)"
        raise AssertionError(msg)
    letter = _INTEGER_LETTERS[int(match.group(2))]
    return PayloadFormat("<" + (letter.upper() if match.group(1) else letter), False)


#: name -> how the bits of a value type read (every type but "ext", a binary payload, and
#: "unknown", a type the recorder did not know: its raw bits)
PAYLOAD_FORMATS = {name: _value_format(name) for name in PAYLOAD_CODES if name not in ("ext", "unknown")}
_Q = struct.Struct("<Q")
_M64 = (1 << 64) - 1


def _value_reader(fmt: PayloadFormat) -> Callable[[int], Union[int, float]]:
    """The value in a payload's 64 raw bits (in their low bytes)."""
    if fmt.floating:
        unpack = struct.Struct(fmt.format).unpack_from
        return lambda raw: unpack(_Q.pack(raw))[0]
    bits = 8 * struct.calcsize(fmt.format)
    mask = (1 << bits) - 1
    if fmt.unsigned:
        return lambda raw: raw & mask
    sign = 1 << (bits - 1)
    return lambda raw: (raw & mask) - ((raw & sign) << 1)


#: value type code -> its value from a payload's raw bits
PAYLOAD_VALUES = {PAYLOAD_CODES[name]: _value_reader(fmt) for name, fmt in PAYLOAD_FORMATS.items()}


def payload_bits(name: str, value: Union[int, float]) -> int:
    """The raw 64 bits of a value of value type ``name``, as the recorder stores them (an integer's
    two's complement in 64 bits)."""
    fmt = PAYLOAD_FORMATS[name]
    if fmt.floating:
        return int.from_bytes(struct.pack(fmt.format, value), "little")
    return int(value) & _M64
