"""NumPy reference of the augmentation layers' random numbers (test_augmentation.py,
test_augmentation_geometry.py): the Philox4x32-10 words of rng::bits4 and the float32 unit they make."""
import numpy as np


M32 = np.uint64(0xFFFFFFFF)


def philox_words(seed, stream, blocks):
    """rng::bits4(seed, stream, block) for each block: (len(blocks), 4) uint64 words, from the
    Philox4x32-10 definition (Salmon et al.)."""
    b = np.asarray(blocks, dtype=np.uint64)
    c = [b & M32, b >> np.uint64(32), np.full_like(b, stream & 0xFFFFFFFF), np.full_like(b, stream >> 32)]
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & M32, (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1),
             p0 & M32]
        k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
        k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return np.stack(c, axis=1)


def unit(word):
    return np.float32(int(word) >> 8) * np.float32(1.0 / 16777216.0)
