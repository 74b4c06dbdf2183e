"""TFRecord files and `tf.train.Example` messages, read and written without TensorFlow.

A TFRecord file is a sequence of records, each framed as

    uint64 length (little endian) | uint32 masked crc32c(length) | data | uint32 masked crc32c(data)

where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32). Both checksums are verified:
a record that ends early or whose bytes do not match its checksum raises `SourceError` with its
offset, so a truncated download is quarantined rather than half-read.

RLDS / TFDS stores one `tf.train.Example` per record. Its protobuf schema is four messages deep
(Example -> Features -> map<string, Feature> -> BytesList | FloatList | Int64List), small enough
to decode by hand from the wire format: varint keys, length-delimited fields, packed floats read
straight into numpy. That avoids a TensorFlow install and a generated-code dependency; the
encoder beside it writes the same bytes TensorFlow does (packed repeated fields), which is how
the tests build RLDS fixtures.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

from robolake.lake.sources.base import SourceError
from robolake.lake.sources.limits import ReadLimits

__all__ = [
    "crc32c",
    "masked_crc",
    "scan_records",
    "read_record",
    "iter_records",
    "write_records",
    "parse_example",
    "encode_example",
]

_POLY = 0x82F63B78
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


def _crc32c_py(data: bytes) -> int:
    c = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


_crc32c_fast: Any = None
try:  # the C implementation is ~1000x faster; images make records megabytes long
    from crc32c import crc32c as _crc32c_fast
except ImportError:  # pragma: no cover
    pass


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of `data`."""
    return int(_crc32c_fast(data)) if _crc32c_fast is not None else _crc32c_py(data)


def masked_crc(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def scan_records(path: str) -> list[tuple[int, int]]:
    """(offset, length) of every record, reading only the 12-byte headers.

    A record whose header is cut off or whose data would run past the end of the file is still
    listed (so it can be quarantined when read); a header whose length checksum fails ends the
    scan, since nothing after it can be trusted.
    """
    out = []
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        offset = 0
        while offset < size:
            f.seek(offset)
            head = f.read(12)
            if len(head) < 12:
                out.append((offset, -1))
                break
            (length,) = struct.unpack("<Q", head[:8])
            (crc,) = struct.unpack("<I", head[8:])
            if masked_crc(head[:8]) != crc:
                out.append((offset, -1))
                break
            out.append((offset, int(length)))
            offset += 12 + int(length) + 4
    return out


def read_record(path: str, offset: int, limits: ReadLimits | None = None) -> bytes:
    """The data of the record at `offset`, checksums verified; its declared length is checked
    against the file's size and the read budget before any of it is read.

    Raises:
        SourceError: `corrupt_file` when the record is truncated or a checksum fails,
            `too_large` when it declares more than the read budget.
    """
    with open(path, "rb") as f:
        f.seek(offset)
        head = f.read(12)
        if len(head) < 12:
            raise SourceError(
                "corrupt_file", path, f"TFRecord at byte {offset} is truncated (header cut off); re-download the file"
            )
        (length,) = struct.unpack("<Q", head[:8])
        if masked_crc(head[:8]) != struct.unpack("<I", head[8:])[0]:
            raise SourceError(
                "corrupt_file", path, f"TFRecord at byte {offset} has a bad length checksum; the file is corrupt"
            )
        (limits or ReadLimits()).check_bytes(length, path, f"TFRecord at byte {offset}")
        if offset + 16 + length > os.fstat(f.fileno()).st_size:  # never ask read() for bytes the file lacks
            raise SourceError(
                "corrupt_file",
                path,
                f"TFRecord at byte {offset} is truncated (it declares {length} bytes, past "
                "the end of the file); re-download or re-export the file",
            )
        data = f.read(length)
        tail = f.read(4)
    if len(data) < length or len(tail) < 4:
        raise SourceError(
            "corrupt_file",
            path,
            f"TFRecord at byte {offset} is truncated ({len(data)} of {length} bytes); "
            "re-download or re-export the file",
        )
    if masked_crc(data) != struct.unpack("<I", tail)[0]:
        raise SourceError(
            "corrupt_file", path, f"TFRecord at byte {offset} fails its data checksum; the file is corrupt"
        )
    return data


def iter_records(path: str) -> Iterator[bytes]:
    for offset, _ in scan_records(path):
        yield read_record(path, offset)


def write_records(path: str, records: list[bytes]) -> None:
    with open(path, "wb") as f:
        for data in records:
            head = struct.pack("<Q", len(data))
            f.write(head + struct.pack("<I", masked_crc(head)) + data + struct.pack("<I", masked_crc(data)))


# --- protobuf wire format ----------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value): int for varint/fixed, bytes for length-delimited."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
            yield num, wt, v
        elif wt == 2:
            ln, pos = _varint(buf, pos)
            if pos + ln > n:
                raise ValueError("truncated length-delimited field")
            yield num, wt, buf[pos : pos + ln]
            pos += ln
        elif wt == 5:
            yield num, wt, buf[pos : pos + 4]
            pos += 4
        elif wt == 1:
            yield num, wt, buf[pos : pos + 8]
            pos += 8
        else:
            raise ValueError(f"unsupported wire type {wt}")


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _feature(buf: bytes) -> list[bytes] | np.ndarray:
    for num, _, body in _fields(buf):
        if num == 1:  # BytesList
            return [bytes(v) for n2, _, v in _fields(body) if n2 == 1]
        if num == 2:  # FloatList: packed or not
            parts = []
            for n2, _wt, v in _fields(body):
                if n2 == 1:
                    parts.append(np.frombuffer(v, dtype="<f4"))
            return np.concatenate(parts) if parts else np.zeros(0, np.float32)
        if num == 3:  # Int64List
            ints: list[int] = []
            for n2, wt, v in _fields(body):
                if n2 != 1:
                    continue
                if wt == 0:
                    ints.append(_signed64(v))
                else:
                    p = 0
                    while p < len(v):
                        x, p = _varint(v, p)
                        ints.append(_signed64(x))
            return np.asarray(ints, dtype=np.int64)
    return np.zeros(0, np.float32)  # an empty Feature


def parse_example(data: bytes) -> dict[str, list[bytes] | np.ndarray]:
    """Feature name -> list of bytes, float32 array or int64 array.

    Raises:
        ValueError: the bytes are not a well-formed `tf.train.Example`.
    """
    out: dict[str, list[bytes] | np.ndarray] = {}
    for num, _, features in _fields(data):
        if num != 1:
            continue
        for n2, _, entry in _fields(features):
            if n2 != 1:
                continue
            key, value = "", b""
            for n3, _, v in _fields(entry):
                if n3 == 1:
                    key = bytes(v).decode("utf-8")
                elif n3 == 2:
                    value = bytes(v)
            out[key] = _feature(value)
    return out


def _put_varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(num: int, body: bytes) -> bytes:
    return _put_varint((num << 3) | 2) + _put_varint(len(body)) + body


def encode_example(features: dict[str, Any]) -> bytes:
    """A serialized `tf.train.Example`: bytes/str lists -> BytesList, floats -> FloatList, ints/bools -> Int64List."""
    entries = b""
    for key, value in features.items():
        if isinstance(value, (bytes, str)):
            value = [value]
        if isinstance(value, list) and (not value or isinstance(value[0], (bytes, str))):
            inner = b"".join(_len_field(1, v.encode() if isinstance(v, str) else v) for v in value)
            feat = _len_field(1, inner)
        else:
            arr = np.asarray(value).reshape(-1)
            if arr.dtype.kind == "f":
                feat = _len_field(2, _len_field(1, arr.astype("<f4").tobytes()))
            else:
                feat = _len_field(3, _len_field(1, b"".join(_put_varint(int(x)) for x in arr)))
        entries += _len_field(1, _len_field(1, key.encode()) + _len_field(2, feat))
    return _len_field(1, entries)
