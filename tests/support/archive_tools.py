"""Building and patching .keras archives for the hostile-file tests (tests/hostile/test_hostile_keras_files.py,
tests/hostile/test_file_limits.py, tests/support/hostile_keras_cases.py): members in a fixed order with a fixed
date (the same bytes on every run), and the zip fields patched in place (declared sizes, flags,
the compression method) to make archives that zipfile itself would never write."""
import base64
import io
import json
import marshal
import re
import stat
import struct
import zipfile

DATE = (2020, 1, 1, 0, 0, 0)
KERAS_MEMBERS = ("metadata.json", "config.json", "model.weights.h5")
# A module whose import leaves a mark: an archive that names it (a custom object's module) must
# never get it imported. Written into a folder on sys.path by the tests.
PAYLOAD_MODULE = "hostile_payload"


def payload_source(marker):
    return f"open({str(marker)!r}, 'w').write('imported')\nclass Evil:\n    pass\n"


def read_members(path_or_bytes):
    """[(name, bytes)] of an archive, in order."""
    src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    with zipfile.ZipFile(src) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def build(members, deflate=(), comment=b""):
    """An archive's bytes from [(name or ZipInfo, bytes)]; names in `deflate` (or all, for True)
    compressed, the rest stored (as Keras and hpcnn write them)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members:
            info = name if isinstance(name, zipfile.ZipInfo) else zipfile.ZipInfo(name, DATE)
            if not isinstance(name, zipfile.ZipInfo):
                info.compress_type = (zipfile.ZIP_DEFLATED if deflate is True or info.filename in deflate
                                      else zipfile.ZIP_STORED)
            z.writestr(info, data)
        z.comment = comment
    return buf.getvalue()


def keras_members(path):
    """The members of an hpcnn-written archive as Keras writes them: hpcnn's own members dropped
    (load_model then builds the model from config.json) and the date fixed."""
    out = []
    for name, data in read_members(path):
        if name == "metadata.json":
            data = json.dumps({"keras_version": "3.15.1", "date_saved": "2020-01-01@00:00:00"}).encode()
        if name in KERAS_MEMBERS:
            out.append((name, data))
    return out


def symlink(name, target):
    info = zipfile.ZipInfo(name, DATE)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def _entries(blob):
    """[(name, central directory offset, local header offset)] of an archive's bytes."""
    out, at = [], 0
    while True:
        at = blob.find(b"PK\x01\x02", at)
        if at < 0:
            return out
        n, e, c = struct.unpack_from("<HHH", blob, at + 28)
        local = struct.unpack_from("<I", blob, at + 42)[0]
        out.append((blob[at + 46:at + 46 + n].decode("utf-8", "replace"), at, local))
        at += 46 + n + e + c


def patch(blob, name, file_size=None, compress_size=None, flags=None, method=None):
    """`blob` with member `name`'s declared fields replaced in its central directory entry and its
    local header (file_size, compress_size, flag bits, compression method)."""
    b = bytearray(blob)
    for member, central, local in _entries(blob):
        if member != name:
            continue
        for value, c_off, l_off, fmt in ((file_size, 24, 22, "<I"), (compress_size, 20, 18, "<I"),
                                         (flags, 8, 6, "<H"), (method, 10, 8, "<H")):
            if value is not None:
                struct.pack_into(fmt, b, central + c_off, value)
                struct.pack_into(fmt, b, local + l_off, value)
    return bytes(b)


def patch_end_record(blob, entries=None, directory=None):
    """`blob` with the end-of-archive record's member count or directory size replaced."""
    b = bytearray(blob)
    at = blob.rfind(b"PK\x05\x06")
    if entries is not None:
        struct.pack_into("<HH", b, at + 8, entries & 0xFFFF, entries & 0xFFFF)
    if directory is not None:
        struct.pack_into("<I", b, at + 12, directory)
    return bytes(b)


def lambda_layer(marker):
    """A Keras 3 Lambda layer entry whose function, if it were ever run (or unmarshalled and
    called), writes `marker`."""
    def f(x, marker=str(marker)):
        open(marker, "w").write("ran")
        return x
    code = base64.b64encode(marshal.dumps(f.__code__)).decode()
    return {"module": "keras.layers", "class_name": "Lambda", "registered_name": None,
            "config": {"name": "lambda", "trainable": True, "dtype": "float32",
                       "function": {"class_name": "__lambda__", "config": {"code": code, "defaults": [str(marker)],
                                                                              "closure": None}},
                       "arguments": {}, "output_shape": None}}


_MTIME = re.compile(rb"(\x12\x00\x08\x00.\x00\x00\x00\x01\x00\x00\x00)....", re.DOTALL)


def fixed_times(h5: bytes) -> bytes:
    """An HDF5 image (version 1 object headers, as hpcnn writes them) with every object's
    modification time (message 0x12) set to DATE: the same bytes on every run."""
    return _MTIME.sub(lambda m: m.group(1) + struct.pack("<I", 1577836800), h5)
