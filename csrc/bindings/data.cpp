// hpcnn._core.data: the HDF5 loader, its prefetching iterator, dataset inspection and the writer.
// The Python layer (python/hpcnn/data.py) gives these their documented, Keras-like shape.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/numpy_tensor.h"
#include "data/h5_dataset.h"
#include "data/image_resize.h"
#include "data/inflate.h"
#include "data/loader.h"
#include "data/prefetcher.h"
#include "data/size_checks.h"
#include "data/writer.h"

namespace hpcnn::bindings {

namespace py = pybind11;
using namespace hpcnn::data;

namespace {

py::dict info_dict(const DatasetInfo& i) {
  py::dict d;
  d["file"] = i.file;
  d["name"] = i.name;
  d["shape"] = py::tuple(py::cast(i.shape));
  d["dtype"] = i.dtype;
  d["chunks"] = i.chunked ? py::object(py::tuple(py::cast(i.chunk))) : py::object(py::none());
  d["compression"] = i.compression();
  std::vector<std::string> f;
  for (auto& x : i.filters) f.push_back(x.name);
  d["filters"] = f;
  d["rows"] = i.rows();
  return d;
}

// The Python-side iterator over one epoch. Waiting happens without the GIL, in slices of 100 ms
// so that Ctrl-C (KeyboardInterrupt) is seen promptly; close() stops and joins the producer.
// Items are (x, y); with stored_u8, (x, y, decode): a uint8 dataset's x as stored and its decode
// (scale, shift) per channel for the model to apply on its device (decode None for float32 x).
class EpochIterator {
 public:
  EpochIterator(std::shared_ptr<Loader> loader, long long epoch, int depth, const std::string& device,
                bool stored_u8, long long first_batch, Shard shard)
      : with_decode_(stored_u8) {
    Device dev = parse_device(device);
    if (stored_u8 && loader->stores_u8())
      decode_ = py::make_tuple(loader->decode_scale(), loader->decode_shift());
    py::gil_scoped_release nogil;
    pf_ = std::make_unique<Prefetcher>(std::move(loader), epoch, depth, dev, stored_u8, first_batch, shard);
  }
  ~EpochIterator() { close(); }

  py::object next() {
    if (!pf_) throw py::stop_iteration();
    Batch b;
    while (true) {
      Prefetcher::Status s;
      try {
        py::gil_scoped_release nogil;
        s = pf_->next(b, 100);
      } catch (...) {
        close();
        throw;
      }
      if (s == Prefetcher::Status::Ready) break;
      if (s == Prefetcher::Status::End) {
        close();
        throw py::stop_iteration();
      }
      if (PyErr_CheckSignals() != 0) {
        close();
        throw py::error_already_set();
      }
    }
    py::object y = b.y.defined() ? py::object(to_numpy(b.y)) : py::object(py::none());
    if (with_decode_) return py::make_tuple(to_numpy(b.x), y, b.x.dtype() == DType::U8 ? decode_ : py::none());
    return py::make_tuple(to_numpy(b.x), y);
  }

  void close() {
    if (!pf_) return;
    std::unique_ptr<Prefetcher> p = std::move(pf_);
    if (PyGILState_Check()) {
      py::gil_scoped_release nogil;
      p.reset();
    } else {
      p.reset();
    }
  }
  bool pinned() const { return pf_ && pf_->pinned(); }

 private:
  std::unique_ptr<Prefetcher> pf_;
  bool with_decode_;
  py::object decode_ = py::none();
};

ArrayToWrite to_write(const std::string& name, const py::array& a) {
  ArrayToWrite w;
  w.name = name;
  w.data = a.data();
  w.shape = shape_of(a);
  w.elem_size = static_cast<size_t>(a.itemsize());
  char k = a.dtype().kind();
  if (k == 'f') w.kind = ScalarKind::Float;
  else if (k == 'i') w.kind = ScalarKind::Int;
  else if (k == 'u' || k == 'b') w.kind = ScalarKind::UInt;
  else throw ValueError(cat("write_hdf5: array '", name, "' has dtype ", std::string(py::str(a.dtype())),
                            "; expected integers or floats"));
  return w;
}

}  // namespace

void bind_data(py::module_& root) {
  // hpcnn::OsError -> OSError(errno, message, filename): a refused write keeps its errno (ENOSPC,
  // EDQUOT, EFBIG, EIO), as Python's own file functions report it.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OsError& e) {
      py::object name = py::reinterpret_steal<py::object>(
          PyUnicode_DecodeFSDefaultAndSize(e.filename.data(), static_cast<Py_ssize_t>(e.filename.size())));
      if (!name) throw py::error_already_set();
      py::object err = py::handle(PyExc_OSError)(e.err, e.what(), name);  // OSError picks the subclass
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
    }
  });
  auto m = root.def_submodule("data", "HDF5 loader, prefetcher and writer (use hpcnn.data)");

  py::class_<Loader, std::shared_ptr<Loader>>(m, "Loader")
      .def(py::init([](const std::string& path, const std::string& x, const std::string& y, long long batch_size,
                       const std::string& shuffle, py::object seed, std::vector<float> scale, std::vector<float> shift,
                       int num_classes, bool one_hot, bool drop_remainder, const std::string& cache,
                       long long memory_budget) {
             LoaderOptions o;
             o.path = path;
             o.x_name = x;
             o.y_name = y;
             o.batch_size = batch_size;
             o.shuffle = parse_shuffle_mode(shuffle);
             if (!seed.is_none()) o.seed = seed.cast<uint64_t>();
             o.scale = std::move(scale);
             o.shift = std::move(shift);
             o.num_classes = num_classes;
             o.one_hot = one_hot;
             o.drop_remainder = drop_remainder;
             o.cache = parse_cache_mode(cache);
             HPCNN_CHECK_ARG(memory_budget > 0, "memory_budget must be > 0 bytes, got ", memory_budget);
             o.memory_budget = static_cast<size_t>(memory_budget);
             py::gil_scoped_release nogil;
             return std::make_shared<Loader>(std::move(o));
           }),
           py::arg("path"), py::arg("x"), py::arg("y"), py::arg("batch_size"), py::arg("shuffle"), py::arg("seed"),
           py::arg("scale"), py::arg("shift"), py::arg("num_classes"), py::arg("one_hot"), py::arg("drop_remainder"),
           py::arg("cache"), py::arg("memory_budget"))
      .def("__len__", &Loader::num_batches)
      .def_property_readonly("num_rows", &Loader::num_rows)
      .def_property_readonly("row_shape", [](const Loader& l) { return py::tuple(py::cast(l.row_shape())); })
      .def_property_readonly("num_classes", &Loader::num_classes)
      .def_property_readonly("has_labels", &Loader::has_labels)
      .def_property_readonly("in_memory", &Loader::in_memory)
      .def_property_readonly("window_blocks", &Loader::window_blocks)
      .def_property_readonly("lanes", &Loader::lanes)
      .def_property_readonly("block_rows", &Loader::block_rows)
      .def_property_readonly("raw_chunk_path", &Loader::raw_chunk_path)
      .def_property_readonly("blocks_read", &Loader::blocks_read)
      .def_property_readonly("bytes_read", &Loader::bytes_read)
      .def_property_readonly("bytes_inflated", &Loader::bytes_inflated)
      .def_property_readonly("warm_blocks_read", &Loader::warm_blocks_read)
      .def_property_readonly("warm_bytes_read", &Loader::warm_bytes_read)
      .def_property_readonly("warm_bytes_inflated", &Loader::warm_bytes_inflated)
      .def("wait_warm_up", [](Loader& l) {
        py::gil_scoped_release nogil;
        l.wait_warm_up();
      }, "Waits for the background load of an epoch's first windows, if one is running (then the counters "
         "stand still).")
      .def_property_readonly("shuffle_mode", [](const Loader& l) { return shuffle_mode_name(l.shuffle_mode()); })
      .def_property_readonly("num_blocks", [](const Loader& l) { return (l.num_rows() + l.block_rows() - 1) / l.block_rows(); })
      .def_property_readonly("peak_cached_bytes", &Loader::peak_cached_bytes)
      .def_property_readonly("io_seconds", &Loader::io_seconds)
      .def_property_readonly("inflate_seconds", &Loader::inflate_seconds)
      .def_property_readonly("scatter_seconds", &Loader::scatter_seconds)
      .def_property_readonly("decode_seconds", &Loader::decode_seconds)
      .def_property_readonly("x_info", [](const Loader& l) { return info_dict(l.x_info()); })
      .def_property_readonly("y_info", [](const Loader& l) {
        return l.y_info() ? py::object(info_dict(*l.y_info())) : py::object(py::none());
      })
      .def("__repr__", &Loader::repr)
      .def("batch", [](Loader& l, long long epoch, long long i) {
        HPCNN_CHECK_ARG(i >= 0 && i < l.num_batches(), "batch index ", i, " out of range for ", l.num_batches(),
                        " batches per epoch");
        long long n = l.batch_rows(i);
        Tensor x = Tensor::empty(l.batch_x_shape(n), DType::F32);
        Tensor y;
        if (l.has_labels())
          y = l.options().one_hot ? Tensor::empty({n, l.num_classes()}, DType::F32) : Tensor::empty({n}, DType::I32);
        {
          py::gil_scoped_release nogil;
          l.fill_batch(epoch, i, x.f32(), y.defined() ? y.raw() : nullptr);
        }
        return py::make_tuple(to_numpy(x), y.defined() ? py::object(to_numpy(y)) : py::object(py::none()));
      }, py::arg("epoch"), py::arg("index"))
      .def("epoch", [](std::shared_ptr<Loader> l, long long epoch, int prefetch, const std::string& device,
                       bool stored_u8, long long first_batch, long long shard_rank, long long shard_ranks) {
        return std::make_unique<EpochIterator>(std::move(l), epoch, prefetch, device, stored_u8, first_batch,
                                               Shard{shard_rank, shard_ranks});
      }, py::arg("epoch"), py::arg("prefetch") = 4, py::arg("device") = "cpu", py::arg("stored_u8") = false,
         py::arg("first_batch") = 0, py::arg("shard_rank") = 0, py::arg("shard_ranks") = 1,
         "Batches of one epoch, made ahead on a C++ thread: (x, y), or with stored_u8 (x, y, decode), where a "
         "uint8 dataset's x comes as stored with decode = (scale, shift) per channel, for a model that decodes on "
         "its GPU (decode None for float32 x). first_batch: start at this batch of the epoch (a resumed run). "
         "shard_rank of shard_ranks: each batch holds only that rank's share of the global batch (0 rows when "
         "the share of a small last batch is empty).")
      .def("batch_rows", &Loader::batch_rows, py::arg("index"), "Rows of batch `index` (of the global batch).")
      .def_property_readonly("seed", &Loader::seed, "The shuffle seed (given, or drawn at construction).")
      .def("set_seed", [](Loader& l, uint64_t seed) {
        py::gil_scoped_release nogil;
        l.set_seed(seed);
      }, py::arg("seed"), "Replaces the shuffle seed (a resumed run repeats the order of the run it continues; a "
         "data-parallel run gives every rank rank 0's).")
      .def_property_readonly("decode", [](const Loader& l) {
        return py::make_tuple(l.decode_scale(), l.decode_shift());
      }, "(scale, shift) per channel: x = stored * scale + shift");

  py::class_<EpochIterator>(m, "EpochIterator")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &EpochIterator::next)
      .def("close", &EpochIterator::close)
      .def_property_readonly("pinned", &EpochIterator::pinned);

  m.def("dataset_info", [](const std::string& path, const std::string& name) {
    DatasetInfo info;
    {
      py::gil_scoped_release nogil;
      info = H5Dataset(path, name).info();
    }
    return info_dict(info);
  }, py::arg("path"), py::arg("name"));

  // A whole dataset as a NumPy array of its stored type: uint8/float32 images through the loader's
  // reader (parallel inflate), integers as int64 (converters and load_data use this).
  m.def("read_dataset", [](const std::string& path, const std::string& name) {
    std::unique_ptr<H5Dataset> d;
    {
      py::gil_scoped_release nogil;
      d = std::make_unique<H5Dataset>(path, name);
    }
    const DatasetInfo& i = d->info();
    std::vector<py::ssize_t> shape(i.shape.begin(), i.shape.end());
    if (i.kind == ElemKind::U8 || i.kind == ElemKind::F32) {
      HPCNN_CHECK_ARG(!i.shape.empty(), d->where(), " is a scalar, expected an array");
      require_memory(d->total_bytes(), cat("reading ", d->where(), " (shape ", shape_str(i.shape), ")"));
      py::array out = i.kind == ElemKind::U8 ? py::array(py::array_t<uint8_t>(shape)) : py::array(py::array_t<float>(shape));
      void* dst = out.mutable_data();
      py::gil_scoped_release nogil;
      d->read_all(dst);
      return out;
    }
    std::vector<int64_t> v;
    {
      py::gil_scoped_release nogil;
      v = d->read_all_int64();
    }
    py::array_t<int64_t> out(shape);
    std::copy(v.begin(), v.end(), out.mutable_data());
    return py::array(out);
  }, py::arg("path"), py::arg("name"));

  m.def("epoch_plan", [](long long rows, long long block_rows, long long window_blocks, const std::string& shuffle,
                         uint64_t seed, long long epoch, long long batch_size, long long lanes) {
    HPCNN_CHECK_ARG(rows >= 0 && block_rows > 0 && window_blocks > 0 && epoch >= 0,
                    "epoch_plan: rows >= 0, block_rows > 0, window_blocks > 0 and epoch >= 0, got ", rows, ", ",
                    block_rows, ", ", window_blocks, ", ", epoch);
    std::optional<ShuffleMode> mode = parse_shuffle_mode(shuffle);
    HPCNN_CHECK_ARG(mode.has_value(), "epoch_plan: shuffle must be 'off', 'rows' or 'chunk_groups'");
    EpochPlan p = make_epoch_plan(rows, block_rows, window_blocks, *mode, seed, epoch, batch_size, lanes);
    py::array_t<int64_t> order(static_cast<py::ssize_t>(p.order.size()));
    std::copy(p.order.begin(), p.order.end(), order.mutable_data());
    return py::make_tuple(order, p.windows, p.window_end, p.lane_windows);
  }, py::arg("rows"), py::arg("block_rows"), py::arg("window_blocks"), py::arg("shuffle"), py::arg("seed"),
     py::arg("epoch"), py::arg("batch_size") = 0, py::arg("lanes") = kChunkGroupLanes,
     "The loader's row order for one epoch (data/shuffle_plan.h), for tests of its distribution: (order: the "
     "rows in delivery order, windows: the block ids of each window, window_end: each window's end (position; "
     "chunk groups: in its lane's rows), lane_windows: lane k's windows [lane_windows[k], lane_windows[k+1]) "
     "(chunk groups; empty otherwise)). shuffle: 'off', 'rows' or 'chunk_groups' (which needs batch_size).");
  m.def("check_epoch_plan", [](std::vector<long long> order, std::vector<std::vector<long long>> windows,
                               std::vector<long long> window_end, long long rows, long long block_rows,
                               long long batch_size, std::vector<long long> lane_windows) {
    EpochPlan p;
    p.order = std::move(order);
    p.windows = std::move(windows);
    p.window_end = std::move(window_end);
    if (!lane_windows.empty()) {
      p.lanes = static_cast<long long>(lane_windows.size()) - 1;
      p.batch_size = batch_size;
      p.lane_windows = std::move(lane_windows);
    }
    check_epoch_plan(p, rows, block_rows);
  }, py::arg("order"), py::arg("windows"), py::arg("window_end"), py::arg("rows"), py::arg("block_rows"),
     py::arg("batch_size") = 0, py::arg("lane_windows") = std::vector<long long>{},
     "The check the loader makes of every epoch plan it makes: RuntimeError naming what is wrong (a plan that "
     "misses or repeats rows, or whose windows do not load the blocks its positions read). A chunk-group plan "
     "gives its batch_size and lane_windows.");
  m.attr("CHUNK_GROUP_LANES") = kChunkGroupLanes;
  m.def("default_chunk_rows", &default_chunk_rows, py::arg("rows"), py::arg("row_bytes"));
  m.def("inflate_library", &inflate_library);

  m.def("write_hdf5", [](const std::string& path, const std::vector<std::pair<std::string, py::array>>& arrays,
                         long long chunk_rows, const std::string& compression, int level, bool shuffle) {
    std::vector<py::array> keep;
    std::vector<ArrayToWrite> w;
    for (auto& [name, arr] : arrays) {
      py::array a = py::array::ensure(arr, py::array::c_style);
      if (!a) throw ValueError(cat("write_hdf5: '", name, "' is not convertible to a contiguous array"));
      // The writer stores native values: a big-endian array ('>f4', '>i8') is converted first
      // (its bytes written as they are would be stored byte-swapped).
      if (!a.dtype().attr("isnative").cast<bool>())
        a = py::array::ensure(a.attr("astype")(a.dtype().attr("newbyteorder")("=")), py::array::c_style);
      w.push_back(to_write(name, a));
      keep.push_back(a);
    }
    WriteOptions o;
    o.chunk_rows = chunk_rows;
    o.compression = compression;
    o.level = level;
    o.shuffle = shuffle;
    py::gil_scoped_release nogil;
    write_hdf5(path, w, o);
  }, py::arg("path"), py::arg("arrays"), py::arg("chunk_rows") = 0, py::arg("compression") = "gzip",
     py::arg("level") = 4, py::arg("shuffle") = true);

  m.def("resize_image", [](const py::array& image, long long height, long long width, const std::string& method,
                           bool to_uint8) -> py::array {
    auto a = py::array_t<uint8_t, py::array::c_style>::ensure(image);
    if (!a || a.dtype().kind() != 'u' || a.itemsize() != 1 || (a.ndim() != 3 && a.ndim() != 2))
      throw ValueError("resize_image: the image must be uint8 (height, width[, channels])");
    ImageShape in{static_cast<long long>(a.shape(0)), static_cast<long long>(a.shape(1)),
                  a.ndim() == 3 ? static_cast<long long>(a.shape(2)) : 1};
    std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(height), static_cast<py::ssize_t>(width),
                                   static_cast<py::ssize_t>(in.channels)};
    if (to_uint8) {
      py::array_t<uint8_t> out(shape);
      uint8_t* o = out.mutable_data();
      const uint8_t* s = a.data();
      {
        py::gil_scoped_release nogil;
        resize_image(s, in, height, width, method, nullptr, o);
      }
      return std::move(out);
    }
    py::array_t<float> out(shape);
    float* o = out.mutable_data();
    const uint8_t* s = a.data();
    {
      py::gil_scoped_release nogil;
      resize_image(s, in, height, width, method, o, nullptr);
    }
    return std::move(out);
  }, py::arg("image"), py::arg("height"), py::arg("width"), py::arg("method") = "bilinear", py::arg("to_uint8") = false,
     "tf.image.resize of a uint8 image (half-pixel centres, no antialiasing; data/image_resize.h): float32, or "
     "uint8 rounded to the nearest integer.");

  py::class_<StreamWriter>(m, "StreamWriter",
                           "A new HDF5 file written a block of rows at a time, renamed onto `path` by commit() "
                           "(data/writer.h).")
      .def(py::init([](const std::string& path, const std::string& compression, int level) {
             WriteOptions o;
             o.compression = compression;
             o.level = level;
             return std::make_unique<StreamWriter>(path, o);
           }), py::arg("path"), py::arg("compression") = "gzip", py::arg("level") = 4)
      .def("create", [](StreamWriter& w, const std::string& name, const std::vector<long long>& shape,
                        const py::dtype& dtype, long long chunk_rows) {
             py::array probe(dtype, std::vector<py::ssize_t>{0});
             ArrayToWrite t = to_write(name, probe);
             w.create(name, shape, t.kind, t.elem_size, chunk_rows);
           }, py::arg("name"), py::arg("shape"), py::arg("dtype"), py::arg("chunk_rows") = 0)
      .def("chunk_rows", &StreamWriter::chunk_rows, py::arg("name"))
      .def("set_rows", &StreamWriter::set_rows, py::arg("name"), py::arg("rows"))
      .def("write", [](StreamWriter& w, const std::string& name, long long first_row, const py::array& arr) {
             py::array a = py::array::ensure(arr, py::array::c_style);
             if (!a || !a.dtype().attr("isnative").cast<bool>())
               throw ValueError(cat("StreamWriter: rows for '", name, "' must be a native-endian array"));
             ArrayToWrite t = to_write(name, a);
             py::gil_scoped_release nogil;
             w.write(name, first_row, t);
           }, py::arg("name"), py::arg("first_row"), py::arg("rows"))
      .def("commit", [](StreamWriter& w) {
             py::gil_scoped_release nogil;
             w.commit();
           })
      .def("close", &StreamWriter::close)
      .def_property_readonly("open", &StreamWriter::open);

  bind_h5_tree(m);
}

}  // namespace hpcnn::bindings
