"""A GGUF file's own metadata, read from its header: what results.json's `quantization` says of a model served
from a GGUF file (llama.cpp's llama-server, llama-cpp-python, Ollama, LM Studio).

Only the key-value header is read, up to the key asked for, and the tensors are never touched: the `gguf`
package's GGUFReader maps and indexes every tensor first (6 s for the embedded 135M model on 2 cores). The
format (ggml's docs/gguf.md): magic `GGUF`, version (uint32), tensor count and key-value count (uint64), then
each key (a uint64-length UTF-8 string), its value type (uint32) and its value, little-endian.

Pure: no pytest, no torch.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

# general.file_type values (llama.cpp's enum llama_ftype, gguf-py's LlamaFileType): the weights' format.
FILE_TYPES: dict[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
    40: "Q1_0",
}

# Value type -> the struct format of a scalar of it (8: string and 9: array are read apart).
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """Not a GGUF file, or a header that ends early; the message names the file."""


def _read(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def _string(stream: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", _read(stream, 8))
    return _read(stream, length).decode("utf-8", errors="replace")


def _value(stream: BinaryIO, kind: int) -> object:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, _read(stream, struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _string(stream)
    if kind == _ARRAY:
        (inner,) = struct.unpack("<I", _read(stream, 4))
        (count,) = struct.unpack("<Q", _read(stream, 8))
        if inner in _SCALARS:
            stream.seek(count * struct.calcsize(_SCALARS[inner]), 1)  # skipped: no key we read is an array
            return None
        for _ in range(count):
            _value(stream, inner)
        return None
    raise ValueError(f"unknown value type {kind}")


def metadata_value(path: Path, key: str) -> object:
    """The value of one header key (None: the file has no such key). GGUFError: not a readable GGUF file."""
    try:
        with path.open("rb") as stream:
            if _read(stream, 4) != b"GGUF":
                raise GGUFError(f"{path} is not a GGUF file (no GGUF magic)")
            (version,) = struct.unpack("<I", _read(stream, 4))
            if version < 2:
                raise GGUFError(f"{path}: GGUF version {version} is older than any llama.cpp reads today")
            _tensors, pairs = struct.unpack("<QQ", _read(stream, 16))
            for _ in range(pairs):
                name = _string(stream)
                (kind,) = struct.unpack("<I", _read(stream, 4))
                value = _value(stream, kind)
                if name == key:
                    return value
    except EOFError:
        raise GGUFError(f"{path}: the GGUF header ends early") from None
    except ValueError as exc:
        if isinstance(exc, GGUFError):
            raise
        raise GGUFError(f"{path}: {exc}") from None
    return None


def quantization(path: Path) -> str | None:
    """The weights' format a GGUF file states (general.file_type: "Q4_1"); None where it states none."""
    value = metadata_value(path, "general.file_type")
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return FILE_TYPES.get(value, f"file_type {value}")
