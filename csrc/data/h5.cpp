#include "data/h5.h"

#include "core/errors.h"

namespace hpcnn::data {

std::recursive_mutex& h5_mutex() {
  static std::recursive_mutex m;
  return m;
}

void h5_quiet() {
  thread_local bool done = false;
  if (!done) {
    H5Lock lock(h5_mutex());
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

namespace {
herr_t collect(unsigned n, const H5E_error2_t* e, void* out) {
  auto* text = static_cast<std::string*>(out);
  if (!e->desc || !*e->desc) return 0;
  std::string d = e->desc;
  if (text->find(d) != std::string::npos) return 0;  // the stack repeats messages as it unwinds
  if (!text->empty()) *text += "; ";
  *text += d;
  return 0;
}
}  // namespace

std::string h5_error_text() {
  H5Lock lock(h5_mutex());
  std::string text;
  // Walk upward: the outermost call's message (e.g. "unable to open file") first, the root cause last.
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect, &text);
  H5Eclear2(H5E_DEFAULT);
  return text;
}

static std::string with_reason(const std::string& context) {
  std::string why = h5_error_text();
  return why.empty() ? context : cat(context, " (HDF5: ", why, ")");
}

H5Id h5_own(hid_t id, H5Id::Closer close, const std::string& context) {
  if (id < 0) throw ValueError(with_reason(context));
  return H5Id(id, close);
}

void h5_check(herr_t status, const std::string& context) {
  if (status < 0) throw ValueError(with_reason(context));
}

std::string h5_type_name(hid_t type) {
  H5Lock lock(h5_mutex());
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  switch (cls) {
    case H5T_INTEGER: return cat(H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int", size * 8);
    case H5T_FLOAT: return cat("float", size * 8);
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    case H5T_ENUM: return "enum";
    case H5T_ARRAY: return "array";
    case H5T_OPAQUE: return "opaque";
    case H5T_VLEN: return "vlen";
    case H5T_REFERENCE: return "reference";
    case H5T_BITFIELD: return "bitfield";
    default: return "unknown type";
  }
}

std::string nonstandard_number(hid_t type, H5T_class_t cls, size_t size) {
  H5Lock lock(h5_mutex());
  size_t precision = H5Tget_precision(type);
  int offset = H5Tget_offset(type);
  if (precision != size * 8 || offset != 0)
    return cat("uses ", precision, " bits at bit offset ", offset, " of its ", size, " bytes");
  if (cls != H5T_FLOAT) return {};
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return "has unreadable float fields";
  size_t ebias = H5Tget_ebias(type);
  H5T_norm_t norm = H5Tget_norm(type);
  bool ieee32 = size == 4 && spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23 && ebias == 127;
  bool ieee64 = size == 8 && spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52 && ebias == 1023;
  bool ieee16 = size == 2 && spos == 15 && epos == 10 && esize == 5 && mpos == 0 && msize == 10 && ebias == 15;
  if (!(ieee32 || ieee64 || ieee16) || norm != H5T_NORM_IMPLIED)
    return cat("is not an IEEE float (sign bit ", spos, ", exponent ", esize, " bits at ", epos, ", mantissa ", msize,
               " bits at ", mpos, ", bias ", ebias, ")");
  return {};
}

}  // namespace hpcnn::data
