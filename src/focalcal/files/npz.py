"""Reading ``.npz`` and ``.npy`` files whose array headers are checked before anything is allocated.

``np.load`` trusts an array's header: a crafted shape such as (10**13, 5) makes it try to
allocate 400 TB, and a shape that fits the machine's overcommit allocates first and fails
later, with nothing naming the file or the key. Here every header is read first and must
describe what the member really holds:

* the dtype is a plain number, boolean or string (no object arrays, which need pickle; no
  structured or sub-array dtypes);
* at most ``max_ndim`` dimensions;
* header bytes + shape × itemsize equal the member's stored (uncompressed) size, so a crafted
  shape and a truncated member are both refused;
* a stored member's compressed size is its size; a deflated member's size is within deflate's
  largest ratio (1032:1) of its compressed bytes, and those bytes lie inside the file.

So the allocation is at most the file's size for stored members (``np.savez``) and deflate's
bound on it for compressed ones (``np.savez_compressed``). Every refusal is one ``ValueError``
line naming the file and the key. Torch-free.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

import numpy as np

ALLOWED_KINDS = "biufUS"  # bool, signed and unsigned int, float, unicode and byte strings
DEFLATE_MAX_RATIO = 1032  # the most that deflate can expand: 258 bytes from 2 bits
_READ_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error)


def read_npz(source: str | os.PathLike | BinaryIO, name: str | None = None, *,
             max_ndim: int | None = None) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` archive (a path or a binary handle), each header checked
    (see the module docstring) before its data is read; keys as ``np.load`` names them."""
    name = str(source) if name is None else name
    try:
        archive = zipfile.ZipFile(source)
    except _READ_ERRORS as error:
        raise ValueError(f"{name}: not a readable .npz file ({_first_line(error)})") from None
    with archive:
        archive_size = _size_of(archive.fp)
        arrays = {}
        for info in archive.infolist():
            key = info.filename.removesuffix(".npy")
            where = f"{name} [{key}]"
            _check_member_sizes(info, archive_size, where)
            try:
                with archive.open(info) as member:
                    arrays[key] = _read_checked_array(member, info.file_size, where, max_ndim)
            except _READ_ERRORS as error:
                if str(error).startswith(where):
                    raise
                raise ValueError(f"{where}: damaged, not a readable array ({_first_line(error)}); the file was "
                                 "altered or truncated after it was written") from None
    return arrays


def read_npy(path: str | os.PathLike, *, max_ndim: int | None = None) -> np.ndarray:
    """The array of one ``.npy`` file, its header checked against the file's size first."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            return _read_checked_array(handle, os.fstat(handle.fileno()).st_size, str(path), max_ndim)
    except _READ_ERRORS as error:
        if str(error).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a readable .npy file ({_first_line(error)})") from None


def _check_member_sizes(info: zipfile.ZipInfo, archive_size: int, where: str) -> None:
    if info.compress_type == zipfile.ZIP_STORED:
        if info.compress_size != info.file_size:
            raise ValueError(f"{where}: stored member claims {info.file_size} bytes but holds {info.compress_size}")
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        if info.file_size > DEFLATE_MAX_RATIO * info.compress_size + 64:
            raise ValueError(f"{where}: claims {info.file_size} bytes from {info.compress_size} compressed, more "
                             f"than deflate can expand ({DEFLATE_MAX_RATIO}:1)")
    else:
        raise ValueError(f"{where}: compression method {info.compress_type} is not one numpy writes "
                         "(stored or deflated)")
    if archive_size is not None and info.header_offset + info.compress_size > archive_size:
        raise ValueError(f"{where}: its {info.compress_size} bytes at offset {info.header_offset} run past the "
                         f"end of the {archive_size}-byte file (truncated)")


def _read_checked_array(handle: BinaryIO, stored_size: int, where: str, max_ndim: int | None) -> np.ndarray:
    """Read one ``.npy`` stream of ``stored_size`` bytes, refusing a header that does not fit."""
    from numpy.lib import format as npy

    version = npy.read_magic(handle)
    if version == (1, 0):
        shape, fortran_order, dtype = npy.read_array_header_1_0(handle)
    elif version == (2, 0):
        shape, fortran_order, dtype = npy.read_array_header_2_0(handle)
    else:
        raise ValueError(f"{where}: .npy format version {version[0]}.{version[1]} is not read (1.0 and 2.0 are)")
    if dtype.hasobject:
        raise ValueError(f"{where}: cannot read it without pickle (an object array, dtype {dtype}); store plain "
                         "numeric and string arrays")
    if dtype.names is not None or dtype.subdtype is not None:
        raise ValueError(f"{where}: structured dtype {dtype} is not a plain array; store one array per key")
    if dtype.kind not in ALLOWED_KINDS:
        raise ValueError(f"{where}: dtype {dtype} is not a number, boolean or string")
    if max_ndim is not None and len(shape) > max_ndim:
        raise ValueError(f"{where}: {len(shape)}-D shape {shape}; at most {max_ndim} dimensions are expected here")
    header_size = handle.tell()
    count = 1
    for extent in shape:  # Python ints: no overflow whatever the header claims
        count *= int(extent)
    data_size = count * dtype.itemsize
    if header_size + data_size != stored_size:
        problem = "truncated" if header_size + data_size > stored_size else "trailing bytes after the data"
        raise ValueError(f"{where}: header declares shape {shape} of {dtype} ({data_size} bytes) but the member "
                         f"holds {stored_size - header_size} data bytes ({problem}); refused before reading")
    buffer = bytearray(data_size)
    view = memoryview(buffer)
    filled = 0
    while filled < data_size:
        got = handle.readinto(view[filled:])
        if not got:
            raise ValueError(f"{where}: ends after {filled} of {data_size} data bytes (truncated)")
        filled += got
    array = np.frombuffer(buffer, dtype=dtype, count=count)
    return array.reshape(shape, order="F" if fortran_order else "C")


def _size_of(handle) -> int | None:
    try:
        return os.fstat(handle.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        try:
            position = handle.tell()
            size = handle.seek(0, os.SEEK_END)
            handle.seek(position)
            return size
        except (AttributeError, OSError, ValueError):
            return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
