// The byte counts of a variable-length string attribute's elements, without reading the strings.
//
// Why: a variable-length string attribute (what h5py writes for a str, and Keras for an .h5 file's
// model_config) stores only a descriptor per element (its length and where the bytes lie in the
// file's global heap); H5Aread fetches the bytes, and on the way HDF5 holds the heap collection,
// a copy of each string and the converted result: about five times the text. A hostile file with
// a 100 MB model_config cost over 500 MB before the 64 MiB limit could refuse it. HDF5 1.10 has no
// call that gives an attribute's string lengths (H5Dvlen_get_buf_size is for datasets), so this
// asks H5Aread to convert to a private type whose conversion function keeps each descriptor's
// length field and reads nothing else; checked once per process on an in-memory attribute of
// known lengths (where this library gives other values, the shortcut is off).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace hpcnn::data {

// The length in bytes of each of the `count` elements of `attr`, a variable-length string attribute,
// in storage order; nullopt when this HDF5 library did not take the conversion (the caller then
// reads the strings and checks their size afterwards). Call with the HDF5 lock held.
std::optional<std::vector<std::uint64_t>> vlen_string_lengths(hid_t attr, size_t count);

}  // namespace hpcnn::data
