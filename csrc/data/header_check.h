// Checks a dataset's layout message before HDF5 1.10 decodes it.
//
// HDF5 1.10 decodes a chunked dataset's layout without checking it against the dataset's shape:
// a damaged version byte or dimensionality makes H5Dopen2 divide by zero (SIGFPE: the process
// dies; HDF5 2.x refuses such files with "bad dimensions for chunked storage"). hpcnn finds the
// layout and dataspace messages in the dataset's object header itself (reading the header's bytes
// with bounds checks: versions 1 and 2 of the object header, continuation blocks included) and
// refuses, with ValueError naming the file and dataset, a chunked layout that HDF5 1.10 could not
// survive: a layout version before 3 (HDF5 1.4-era files, for which hpcnn makes no promise), a
// dimensionality other than the dataset's rank + 1, or a zero chunk dimension. Anything it cannot
// make sense of is left to HDF5, whose own checks refuse it.
#pragma once

#include <hdf5.h>

#include <string>

#include "data/raw_file.h"

namespace hpcnn::data {

// `file`: the open file; `name`: the dataset's path in it (it exists); `where` names both in
// messages. The caller holds h5_mutex().
void check_dataset_header(hid_t file, const RawFile& raw, const std::string& name, const std::string& where);

}  // namespace hpcnn::data
