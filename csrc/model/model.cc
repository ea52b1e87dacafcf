// Loading a v0 model: the flatc-generated Verifier, then the semantic checks every later
// stage relies on (indices in range, dims bounded, const data sized to its dims, unions
// known, subgraph references valid). Then the records Python (msv0/model.py) builds the model
// from: tensors, nodes with their attributes, subgraphs and the quantParams as columns, read
// here in one pass (the generated Python readers took ~10 ms for MobileNetV2's 64 nodes).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "flatbuffers/minireflect.h"
#include "model_v0_generated.h"
#include "type_id_generated.h"
#include "runtime/bind.h"
#include "runtime/weight_memory.h"

namespace msv0 {
namespace fb = mindspore::schema::v0;

namespace {

// Raised as msv0.ModelError (see the translator below).
struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The bytes of a model: a borrowed immutable Python object, an owned copy, or a mapped file.
struct Storage {
  py::object owner;  // keeps borrowed bytes alive
  std::string copy;
  void* map = nullptr;
  size_t size = 0;
  const uint8_t* data = nullptr;
  ~Storage() {
    if (map) munmap(map, size);
  }
};

std::shared_ptr<Storage> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {  // FileNotFoundError, PermissionError, ... as Python's open() would raise
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path.c_str());
    throw py::error_already_set();
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ModelError(path + ": not a regular file");
  }
  auto s = std::make_shared<Storage>();
  s->size = static_cast<size_t>(st.st_size);
  if (s->size == 0) {
    ::close(fd);
    throw ModelError(path + ": empty file");
  }
  void* p = mmap(nullptr, s->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw ModelError(path + ": cannot map file: " + std::strerror(errno));
  s->map = p;
  s->data = static_cast<const uint8_t*>(p);
  return s;
}

std::shared_ptr<Storage> borrow_or_copy(const py::object& src) {
  auto s = std::make_shared<Storage>();
  if (py::isinstance<py::bytes>(src)) {  // immutable: alias it
    s->owner = src;
    char* p = nullptr;
    Py_ssize_t n = 0;
    PyBytes_AsStringAndSize(src.ptr(), &p, &n);
    s->data = reinterpret_cast<const uint8_t*>(p);
    s->size = static_cast<size_t>(n);
  } else {
    // A writable buffer could change under the verified views, so it is copied once.
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(src).request();
    if (!PyBuffer_IsContiguous(reinterpret_cast<Py_buffer*>(&info), 'C') && info.ndim > 1)
      throw ModelError("model buffer must be contiguous");
    s->copy.assign(static_cast<const char*>(info.ptr), static_cast<size_t>(info.size * info.itemsize));
    s->data = reinterpret_cast<const uint8_t*>(s->copy.data());
    s->size = s->copy.size();
  }
  if (s->size == 0) throw ModelError("empty model buffer");
  return s;
}

// Bytes per element of a TypeId (format-v0.md §2); 0 = no fixed size. Python's dtypes.TO_NUMPY
// is the table of element types; tests/test_schema_names.py checks these sizes against it.
int item_size(int type_id) {
  using T = fb::TypeId;
  switch (static_cast<T>(type_id)) {
    case T::kObjectTypeString: case T::kNumberTypeBool: case T::kNumberTypeInt8: case T::kNumberTypeUInt8:
      return 1;
    case T::kNumberTypeInt16: case T::kNumberTypeUInt16: case T::kNumberTypeFloat16:
      return 2;
    case T::kNumberTypeInt: case T::kNumberTypeInt32: case T::kNumberTypeUInt: case T::kNumberTypeUInt32:
    case T::kNumberTypeFloat: case T::kNumberTypeFloat32: case T::kObjectTypeTensorType:
      return 4;
    case T::kNumberTypeInt64: case T::kNumberTypeUInt64: case T::kNumberTypeFloat64:
      return 8;
    default:
      return 0;
  }
}

constexpr int64_t kMaxElements = int64_t(1) << 36;  // bounds every size computed from dims

std::string tensor_label(const fb::Tensor* t, size_t i) {
  std::string s = "tensor " + std::to_string(i);
  if (t->name()) s += " '" + t->name()->str() + "'";
  return s;
}

std::string node_label(const fb::CNode* n, size_t i) {
  std::string s = "node " + std::to_string(i);
  if (n->name()) s += " '" + n->name()->str() + "'";
  return s;
}

template <class V>
void check_indices(const V* idx, size_t limit, const std::string& what, const char* field) {
  if (!idx) return;
  for (size_t k = 0; k < idx->size(); ++k)
    if (idx->Get(k) >= limit)
      throw ModelError(what + ": " + field + "[" + std::to_string(k) + "] = " +
                       std::to_string(idx->Get(k)) + " is out of range (" + std::to_string(limit) + ")");
}

void check_tensor(const fb::Tensor* t, size_t i) {
  int64_t elements = 1;
  if (t->dims())
    for (size_t d = 0; d < t->dims()->size(); ++d) {
      const int dim = t->dims()->Get(d);
      if (dim < 0) throw ModelError(tensor_label(t, i) + ": negative dimension " + std::to_string(dim));
      // Checked before multiplying: a signed overflow is undefined, and dims after a wrap
      // could end on 0 and pass as an empty tensor.
      if (dim != 0 && elements > kMaxElements / dim)
        throw ModelError(tensor_label(t, i) + ": too many elements");
      elements *= dim;
    }
  if (!t->data() || t->data()->size() == 0) return;
  const int64_t bytes = t->data()->size();
  const auto type = static_cast<fb::TypeId>(t->dataType());
  // A string's shape is [len(data)]; a TensorList's data is an encoded header.
  if (type == fb::TypeId::kObjectTypeString || type == fb::TypeId::kObjectTypeTensorType) return;
  const int size = item_size(t->dataType());
  if (size == 0) throw ModelError(tensor_label(t, i) + ": data of unsupported dataType " + std::to_string(t->dataType()));
  if (bytes == elements * size) return;
  if (!t->dims() || t->dims()->size() == 0) {
    if (bytes == size) return;  // const scalar
  }
  // Bit-packed weights (numBits < 8 stored as int8, 9..15 as int16) are shorter than their dims.
  const bool int8 = type == fb::TypeId::kNumberTypeInt8, int16 = type == fb::TypeId::kNumberTypeInt16;
  if ((int8 || int16) && t->quantParams() && t->quantParams()->size() > 0) {
    const int bits = t->quantParams()->Get(0)->numBits();
    const bool packed = (int8 && bits > 0 && bits < 8) || (int16 && bits > 8 && bits < 16);
    if (packed && bytes * 8 >= elements * bits && bytes <= elements * size) return;
  }
  throw ModelError(tensor_label(t, i) + ": data has " + std::to_string(bytes) + " bytes, dims need " +
                   std::to_string(elements * size));
}

void check_model(const fb::MetaGraph* g) {
  const size_t n_tensors = g->allTensors() ? g->allTensors()->size() : 0;
  const size_t n_nodes = g->nodes() ? g->nodes()->size() : 0;
  const size_t n_subgraphs = g->subGraph() ? g->subGraph()->size() : 0;
  for (size_t i = 0; i < n_tensors; ++i) check_tensor(g->allTensors()->Get(i), i);
  check_indices(g->inputIndex(), n_tensors, "model", "inputIndex");
  check_indices(g->outputIndex(), n_tensors, "model", "outputIndex");
  if (g->subGraph() && n_subgraphs == 0) throw ModelError("model: subGraph is present but empty");
  for (size_t i = 0; i < n_subgraphs; ++i) {
    const fb::SubGraph* s = g->subGraph()->Get(i);
    const std::string what = "subgraph " + std::to_string(i);
    check_indices(s->inputIndices(), n_tensors, what, "inputIndices");
    check_indices(s->outputIndices(), n_tensors, what, "outputIndices");
    check_indices(s->tensorIndices(), n_tensors, what, "tensorIndices");
    check_indices(s->nodeIndices(), n_nodes, what, "nodeIndices");
  }
  for (size_t i = 0; i < n_nodes; ++i) {
    const fb::CNode* n = g->nodes()->Get(i);
    const std::string what = node_label(n, i);
    if (!n->name()) throw ModelError(what + ": missing name");
    if (!n->inputIndex()) throw ModelError(what + ": missing inputIndex");
    if (!n->outputIndex()) throw ModelError(what + ": missing outputIndex");
    check_indices(n->inputIndex(), n_tensors, what, "inputIndex");
    check_indices(n->outputIndex(), n_tensors, what, "outputIndex");
    const fb::Primitive* p = n->primitive();
    const auto type = p ? static_cast<int>(p->value_type()) : 0;
    if (type <= 0 || type > static_cast<int>(fb::PrimitiveType::MAX))
      throw ModelError(what + ": unknown primitive type " + std::to_string(type));
    if (!p->value()) throw ModelError(what + ": primitive " + fb::EnumNamePrimitiveType(p->value_type()) + " has no table");
    auto check_subgraph = [&](int index, const char* field) {
      if (index < 0 || static_cast<size_t>(index) >= n_subgraphs)
        throw ModelError(what + ": " + field + " = " + std::to_string(index) + " names no subgraph (" +
                         std::to_string(n_subgraphs) + ")");
    };
    if (auto w = p->value_as_While()) {
      check_subgraph(w->condSubgraphIndex(), "condSubgraphIndex");
      check_subgraph(w->bodySubgraphIndex(), "bodySubgraphIndex");
    } else if (auto q = p->value_as_Partial()) {
      check_subgraph(q->subGraphIndex(), "subGraphIndex");
    } else if (auto l = p->value_as_Loop()) {
      check_subgraph(l->subGraphIndex(), "subGraphIndex");
    }
  }
}

// Error messages quote names, which are labels: bytes that are not UTF-8 must not stop them.
py::str text(const std::string& s) {
  return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

// A name field: "" when the file omits it.
py::str text(const flatbuffers::String* s) { return text(s ? s->str() : std::string()); }

py::bytes bytes_of(const flatbuffers::String* s) { return py::bytes(s->data(), s->size()); }

template <typename T>
py::tuple tuple_of(const flatbuffers::Vector<T>* v) {
  py::tuple out(v ? v->size() : 0);
  for (flatbuffers::uoffset_t i = 0; v && i < v->size(); ++i) out[i] = v->Get(i);
  return out;
}

// A scalar of an op table at p as the generated Python readers give it: bool, int (enums as
// their number) or float.
py::object scalar(flatbuffers::ElementaryType type, const uint8_t* p) {
  using flatbuffers::ReadScalar;
  switch (type) {
    case flatbuffers::ET_BOOL: return py::bool_(ReadScalar<uint8_t>(p) != 0);
    case flatbuffers::ET_CHAR: return py::int_(ReadScalar<int8_t>(p));
    case flatbuffers::ET_UCHAR: return py::int_(ReadScalar<uint8_t>(p));
    case flatbuffers::ET_SHORT: return py::int_(ReadScalar<int16_t>(p));
    case flatbuffers::ET_USHORT: return py::int_(ReadScalar<uint16_t>(p));
    case flatbuffers::ET_INT: return py::int_(ReadScalar<int32_t>(p));
    case flatbuffers::ET_UINT: return py::int_(ReadScalar<uint32_t>(p));
    case flatbuffers::ET_LONG: return py::int_(ReadScalar<int64_t>(p));
    case flatbuffers::ET_ULONG: return py::int_(ReadScalar<uint64_t>(p));
    case flatbuffers::ET_FLOAT: return py::float_(ReadScalar<float>(p));
    case flatbuffers::ET_DOUBLE: return py::float_(ReadScalar<double>(p));
    default: throw std::logic_error("ops_v0.fbs has a field type msv0 does not read");
  }
}

// The fields an op table holds, as (field number in schema order, value): scalars, strings
// (bytes) and vectors of scalars (tuples), the only kinds ops_v0.fbs has. Absent fields are left
// to the caller's defaults; numbers, not names, since the generated Python renames some fields.
py::list op_fields(const flatbuffers::Table* t, const flatbuffers::TypeTable* tt) {
  py::list fields;
  for (size_t i = 0; i < tt->num_elems; ++i) {
    const flatbuffers::TypeCode tc = tt->type_codes[i];
    const auto type = static_cast<flatbuffers::ElementaryType>(tc.base_type);
    const auto field = static_cast<flatbuffers::voffset_t>(
        flatbuffers::FieldIndexToOffset(static_cast<flatbuffers::voffset_t>(i)));
    if (!t->GetAddressOf(field)) continue;
    if (type == flatbuffers::ET_STRING && !tc.is_repeating) {
      fields.append(py::make_tuple(i, bytes_of(t->GetPointer<const flatbuffers::String*>(field))));
    } else if (tc.is_repeating) {
      const auto* v = t->GetPointer<const flatbuffers::Vector<uint8_t>*>(field);
      const size_t size = flatbuffers::InlineSize(type, nullptr);
      py::tuple out(v->size());
      for (flatbuffers::uoffset_t j = 0; j < v->size(); ++j) out[j] = scalar(type, v->Data() + j * size);
      fields.append(py::make_tuple(i, out));
    } else {
      fields.append(py::make_tuple(i, scalar(type, t->GetAddressOf(field))));
    }
  }
  return fields;
}

class Model {
 public:
  explicit Model(std::shared_ptr<Storage> s) : s_(std::move(s)) {
    flatbuffers::Verifier::Options opts;
    opts.max_tables = 1u << 24;
    flatbuffers::Verifier v(s_->data, s_->size, opts);
    if (!fb::VerifyMetaGraphBuffer(v)) throw ModelError("not a valid v0 model: FlatBuffers verification failed");
    check_model(fb::GetMetaGraph(s_->data));
  }

  // Read-only uint8 array over [ptr, ptr + n) that keeps the storage alive.
  py::array view(const uint8_t* ptr, size_t n) const {
    auto* keep = new std::shared_ptr<Storage>(s_);
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
    py::array a(py::dtype::of<uint8_t>(), {static_cast<py::ssize_t>(n)}, {1}, ptr, base);
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return a;
  }

  py::array buffer() const { return view(s_->data, s_->size); }

  // Every tensor's quantParams as columns named as in the schema, tensor i's at rows
  // [offsets[i], offsets[i + 1]): a per-channel int8 model has tens of thousands, seconds' work
  // for the generated Python readers one table at a time.
  py::tuple quant_params() const {
    const auto* tensors = fb::GetMetaGraph(s_->data)->allTensors();
    const size_t n = tensors ? tensors->size() : 0;
    py::array_t<int64_t> offsets(static_cast<py::ssize_t>(n + 1));
    int64_t* off = offsets.mutable_data();
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      off[i] = static_cast<int64_t>(total);
      const auto* q = tensors->Get(static_cast<flatbuffers::uoffset_t>(i))->quantParams();
      total += q ? q->size() : 0;
    }
    off[n] = static_cast<int64_t>(total);
    const auto rows = static_cast<py::ssize_t>(total);
    py::array_t<double> scale(rows), min(rows), max(rows);
    py::array_t<int32_t> zero_point(rows), num_bits(rows), dst_dtype(rows), round_type(rows), multiplier(rows);
    py::array_t<bool> narrow_range(rows), inited(rows);
    py::array_t<float> var_corr(rows), mean_corr(rows);
    double *scale_p = scale.mutable_data(), *min_p = min.mutable_data(), *max_p = max.mutable_data();
    int32_t *zp_p = zero_point.mutable_data(), *bits_p = num_bits.mutable_data(), *dst_p = dst_dtype.mutable_data();
    int32_t *round_p = round_type.mutable_data(), *mult_p = multiplier.mutable_data();
    bool *narrow_p = narrow_range.mutable_data(), *inited_p = inited.mutable_data();
    float *var_p = var_corr.mutable_data(), *mean_p = mean_corr.mutable_data();
    size_t r = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto* q = tensors->Get(static_cast<flatbuffers::uoffset_t>(i))->quantParams();
      for (flatbuffers::uoffset_t j = 0; q && j < q->size(); ++j, ++r) {
        const fb::QuantParam* p = q->Get(j);
        scale_p[r] = p->scale(), zp_p[r] = p->zeroPoint(), min_p[r] = p->min(), max_p[r] = p->max();
        narrow_p[r] = p->narrowRange(), bits_p[r] = p->numBits(), inited_p[r] = p->inited();
        var_p[r] = p->varCorr(), mean_p[r] = p->meanCorr(), dst_p[r] = p->dstDtype();
        round_p[r] = p->roundType(), mult_p[r] = p->multiplier();
      }
    }
    py::dict columns;
    columns["scale"] = scale, columns["zeroPoint"] = zero_point, columns["min"] = min, columns["max"] = max;
    columns["narrowRange"] = narrow_range, columns["numBits"] = num_bits, columns["inited"] = inited;
    columns["varCorr"] = var_corr, columns["meanCorr"] = mean_corr, columns["dstDtype"] = dst_dtype;
    columns["roundType"] = round_type, columns["multiplier"] = multiplier;
    return py::make_tuple(offsets, columns);
  }

  // Drops from memory the file pages wholly inside `bytes` (a view of this model's buffer), as
  // a Session does once it has packed a weight: a private read-only file mapping is refilled
  // from the page cache if they are read again, so the views stay valid. Models given as bytes
  // are left alone (their memory is the only copy).
  void release(const py::array& bytes) const {
    if (!s_->map) return;
    const auto* p = static_cast<const uint8_t*>(bytes.data());
    const auto n = static_cast<size_t>(bytes.nbytes());
    if (p < s_->data || n > s_->size || p - s_->data > static_cast<ptrdiff_t>(s_->size - n))
      throw ArgError("release: the array is not a view of this model's bytes");
    release_pages(p, n);
  }

  // (name, version, inputIndex, outputIndex, tensors, nodes, subGraphs) of the MetaGraph:
  // tensor (name, dataType, dims, format, nodeType, data offset in the buffer or -1 when empty,
  // data size, quantClusters); node (name, primitive type, its present fields, inputIndex,
  // outputIndex, quantType); subgraph (name, inputIndices, outputIndices, nodeIndices,
  // tensorIndices). Verified: every table and vector read here is in the buffer.
  py::tuple graph() const {
    const fb::MetaGraph* g = fb::GetMetaGraph(s_->data);
    py::list tensors, nodes, subgraphs;
    const auto* all_tensors = g->allTensors();
    for (flatbuffers::uoffset_t i = 0; all_tensors && i < all_tensors->size(); ++i) {
      const fb::Tensor* t = all_tensors->Get(i);
      const auto* data = t->data();
      const bool empty = !data || data->size() == 0;
      tensors.append(py::make_tuple(text(t->name()), t->dataType(), tuple_of(t->dims()),
                                    static_cast<int>(t->format()), static_cast<int>(t->nodeType()),
                                    empty ? int64_t{-1} : static_cast<int64_t>(data->Data() - s_->data),
                                    empty ? 0 : data->size(), tuple_of(t->quantClusters())));
    }
    const flatbuffers::TypeTable* ops = fb::PrimitiveTypeTypeTable();
    const auto* all_nodes = g->nodes();
    for (flatbuffers::uoffset_t i = 0; all_nodes && i < all_nodes->size(); ++i) {
      const fb::CNode* n = all_nodes->Get(i);
      const fb::Primitive* p = n->primitive();
      const auto type = static_cast<size_t>(p->value_type());
      const flatbuffers::TypeTable* op = ops->type_refs[ops->type_codes[type].sequence_ref]();
      nodes.append(py::make_tuple(text(n->name()), type,
                                  op_fields(static_cast<const flatbuffers::Table*>(p->value()), op),
                                  tuple_of(n->inputIndex()), tuple_of(n->outputIndex()),
                                  static_cast<int>(n->quantType())));
    }
    const auto* all_subgraphs = g->subGraph();
    for (flatbuffers::uoffset_t i = 0; all_subgraphs && i < all_subgraphs->size(); ++i) {
      const fb::SubGraph* sg = all_subgraphs->Get(i);
      subgraphs.append(py::make_tuple(text(sg->name()), tuple_of(sg->inputIndices()),
                                      tuple_of(sg->outputIndices()), tuple_of(sg->nodeIndices()),
                                      tuple_of(sg->tensorIndices())));
    }
    return py::make_tuple(text(g->name()), text(g->version()),
                          tuple_of(g->inputIndex()), tuple_of(g->outputIndex()), tensors, nodes, subgraphs);
  }

 private:
  std::shared_ptr<Storage> s_;
};

}  // namespace

MSV0_BIND(m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ModelError& e) {
      py::object cls = py::module_::import("msv0.errors").attr("ModelError");
      PyErr_SetObject(cls.ptr(), text(e.what()).ptr());
    }
  });

  py::class_<Model>(m, "Model", "A verified v0 model; every index in it is known to be in range.")
      .def(py::init([](const py::object& src) {
             if (py::isinstance<py::str>(src) || py::hasattr(src, "__fspath__")) {
               const std::string path = py::str(py::module_::import("os").attr("fspath")(src));
               return new Model(map_file(path));
             }
             if (!PyObject_CheckBuffer(src.ptr()))
               throw py::type_error("msv0.load expects a path, bytes or a buffer");
             return new Model(borrow_or_copy(src));
           }), py::arg("source"))
      .def_property_readonly("buffer", &Model::buffer, "The model bytes (read-only), read by msv0.model.")
      .def("release", &Model::release, py::arg("bytes"),
           "Drop the file pages wholly inside `bytes` (a view of buffer) from memory; reads refill them.")
      .def("graph", &Model::graph, "The MetaGraph's records, read by msv0.model.load (see the source).")
      .def("quant_params", &Model::quant_params,
           "(offsets, {field: column}): every tensor's quantParams, tensor i's at rows offsets[i]:offsets[i + 1].");
}

}  // namespace msv0
