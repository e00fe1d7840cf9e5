// Linear programs built by hand, for the renderer, interpreter and end-to-end kernel tests. A
// ProgramBuilder appends nodes in the order the test emits them, sources first, so a test reads
// like the kernel it builds; the sample programs below are shared by all three test files.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <vkgrad/codegen/cpu_interpreter.hpp>
#include <vkgrad/codegen/program.hpp>

namespace vkg::test {

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name) { p_.name = std::move(name); }

  static UOpPtr c(DType d, Scalarish v) { return UOp::const_(d, v); }
  static UOpPtr i32(int64_t v) { return UOp::const_(dtypes::int32, v); }

  // The next buffer slot, holding `count` elements of `element`.
  UOpPtr global(DType element, int64_t count, bool written = false) {
    const int slot = int(p_.buffers.size());
    p_.buffers.push_back({slot, element, count, written});
    return emit(UOp::make(Ops::DEFINE_GLOBAL, element.ptr(), {}, int64_t(slot)));
  }
  UOpPtr var(const std::string& name, int64_t min, int64_t max) {
    p_.vars.push_back({name, min, max});
    return emit(UOp::var(name, min, max));
  }
  UOpPtr special(const std::string& name, int64_t size) {
    return emit(UOp::make(Ops::SPECIAL, dtypes::int32, {i32(size)}, name));
  }
  UOpPtr local(int64_t id, DType element, int64_t count) {
    return emit(UOp::make(Ops::DEFINE_LOCAL, element.ptr(AddrSpace::Local), {},
                          std::vector<int64_t>{id, count}));
  }

  UOpPtr range(int64_t id, const UOpPtr& end) {
    return emit(UOp::make(Ops::RANGE, dtypes::int32, {end}, id));
  }
  void end_range(const UOpPtr& r) { emit(UOp::make(Ops::ENDRANGE, dtypes::void_, {r})); }
  UOpPtr if_(const UOpPtr& cond) { return emit(UOp::make(Ops::IF, dtypes::void_, {cond})); }
  void end_if(const UOpPtr& i) { emit(UOp::make(Ops::ENDIF, dtypes::void_, {i})); }
  void barrier(std::vector<UOpPtr> stores) {
    emit(UOp::make(Ops::BARRIER, dtypes::void_, std::move(stores)));
  }

  UOpPtr acc(int64_t id, const UOpPtr& init, std::vector<UOpPtr> ranges) {
    std::vector<UOpPtr> src{init};
    src.insert(src.end(), ranges.begin(), ranges.end());
    return emit(UOp::make(Ops::DEFINE_ACC, init->dtype, std::move(src), id));
  }
  UOpPtr assign(const UOpPtr& acc, const UOpPtr& value) {
    return emit(UOp::make(Ops::ASSIGN, acc->dtype, {acc, value}));
  }

  static UOpPtr index(const UOpPtr& buffer, const UOpPtr& i, const UOpPtr& valid = nullptr) {
    std::vector<UOpPtr> src{buffer, i};
    if (valid) src.push_back(valid);
    return UOp::make(Ops::INDEX, buffer->dtype, std::move(src));
  }
  // `width` > 1 loads that many consecutive elements as one vector.
  UOpPtr load(const UOpPtr& buffer, const UOpPtr& i, const UOpPtr& valid = nullptr,
              const UOpPtr& alt = nullptr, int width = 1) {
    std::vector<UOpPtr> src{index(buffer, i, valid)};
    if (alt) src.push_back(alt);
    return emit(UOp::make(Ops::LOAD, DType{buffer->dtype.scalar, uint8_t(width)}, std::move(src)));
  }
  UOpPtr store(const UOpPtr& buffer, const UOpPtr& i, const UOpPtr& value,
               const UOpPtr& valid = nullptr) {
    return emit(UOp::make(Ops::STORE, dtypes::void_, {index(buffer, i, valid), value}));
  }

  // Appends u after any of its sources not yet in the program (a DEFINE_ACC's RANGEs excepted).
  UOpPtr emit(const UOpPtr& u) {
    if (emitted_.count(u.get())) return u;
    for (const UOpPtr& s : u->src)
      if (!(u->op == Ops::DEFINE_ACC && s->op == Ops::RANGE)) emit(s);
    emitted_.insert(u.get());
    p_.uops.push_back(u);
    return u;
  }

  Program build(std::array<int64_t, 3> global, std::array<int64_t, 3> local) {
    p_.global_size = global;
    p_.local_size = local;
    return p_;
  }

 private:
  Program p_;
  std::set<const UOp*> emitted_;
};

inline UOpPtr alu(Ops op, const UOpPtr& a, const UOpPtr& b) { return a->alu(op, {b}); }

inline std::string fmt_name(Ops op, DType d, int64_t n) {
  return "E_" + std::string(op_name(op)) + "_" + d.name() + "_" + std::to_string(n);
}

// ---- the sample programs ----

// E_n: out[i] = a[i] + b[i] for i < n, over workgroups of 32 (the last one partly guarded off).
inline Program elementwise_add(DType d, int64_t n) {
  ProgramBuilder b("E_" + std::to_string(n));
  auto out = b.global(d, n, true), x = b.global(d, n), y = b.global(d, n);
  auto i = b.special("idx0", n);
  auto a = b.load(x, i), c = b.load(y, i);
  b.store(out, i, a + c);
  return b.build({(n + 31) / 32, 1, 1}, {32, 1, 1});
}

// The seed-000 dot product, r_2: one invocation, a RANGE loop into an accumulator.
inline Program dot_product() {
  ProgramBuilder b("r_2");
  auto out = b.global(dtypes::int32, 1, true), x = b.global(dtypes::int32, 2),
       y = b.global(dtypes::int32, 2);
  auto r = b.range(0, ProgramBuilder::i32(2));
  auto acc = b.acc(0, ProgramBuilder::i32(0), {r});
  auto a = b.load(x, r), c = b.load(y, r);
  auto done = b.assign(acc, acc + a * c);
  b.end_range(r);
  b.store(out, ProgramBuilder::i32(0), done);
  return b.build({1, 1, 1}, {1, 1, 1});
}

// E_10: out[i] = (3 <= i < 8) ? in[i - 3] : -1.5, a pad of 3 and 2 around a 5-element input: the
// raw index i - 3 runs from -3 to 6, out of bounds on both sides where the mask is off.
inline Program padded_load() {
  ProgramBuilder b("E_10");
  auto out = b.global(dtypes::float32, 10, true), in = b.global(dtypes::float32, 5);
  auto i = b.special("gidx0", 10);
  auto valid = alu(Ops::AND, i->lt(3)->logical_not(), i->lt(8));
  b.store(out, i, b.load(in, i - 3, valid, ProgramBuilder::c(dtypes::float32, -1.5)));
  return b.build({10, 1, 1}, {1, 1, 1});
}

// E_n: q[i] = a[i] / b[i], r[i] = a[i] % b[i] (C: truncate toward zero, remainder has a's sign).
inline Program int_div_mod(DType d, int64_t n) {
  ProgramBuilder b("E_divmod_" + d.name());
  auto q = b.global(d, n, true), r = b.global(d, n, true), x = b.global(d, n), y = b.global(d, n);
  auto i = b.special("gidx0", n);
  auto a = b.load(x, i), c = b.load(y, i);
  b.store(q, i, a / c);
  b.store(r, i, a % c);
  return b.build({n, 1, 1}, {1, 1, 1});
}

// q[i] = x[i] / c, r[i] = x[i] % c for a constant c, as index math divides.
inline Program int_div_mod_by(DType d, int64_t n, int64_t c) {
  ProgramBuilder b("E_divmod_const_" + d.name());
  auto q = b.global(d, n, true), r = b.global(d, n, true), x = b.global(d, n);
  auto i = b.special("gidx0", n);
  auto a = b.load(x, i), k = UOp::const_(d, c);
  b.store(q, i, a / k);
  b.store(r, i, a % k);
  return b.build({n, 1, 1}, {1, 1, 1});
}

// E_n over bool storage: nz[i] = bool(in[i]) (any nonzero byte is true), inv[i] = !nz[i],
// big[i] = values[i] > 2 (a comparison stored as bool).
inline Program bool_storage(int64_t n) {
  ProgramBuilder b("E_bool_" + std::to_string(n));
  auto inv = b.global(dtypes::bool_, n, true), big = b.global(dtypes::bool_, n, true);
  auto in = b.global(dtypes::bool_, n), values = b.global(dtypes::int32, n);
  auto i = b.special("gidx0", n);
  b.store(inv, i, b.load(in, i)->logical_not());
  b.store(big, i, ProgramBuilder::i32(2)->lt(b.load(values, i)));
  return b.build({n, 1, 1}, {1, 1, 1});
}

// r_rows_16: out[g] = sum of in[g*16 .. g*16+15], one workgroup of 16 per row: each invocation
// stores its element to local memory, then invocation 0 sums them after a BARRIER.
inline Program workgroup_sum(int64_t rows) {
  ProgramBuilder b("r_" + std::to_string(rows) + "_16");
  auto out = b.global(dtypes::float32, rows, true), in = b.global(dtypes::float32, rows * 16);
  auto temp = b.local(0, dtypes::float32, 16);
  auto g = b.special("gidx0", rows), l = b.special("lidx0", 16);
  auto st = b.store(temp, l, b.load(in, g * 16 + l));
  b.barrier({st});
  auto first = b.if_(l->lt(1));
  auto r = b.range(0, ProgramBuilder::i32(16));
  auto acc = b.acc(0, ProgramBuilder::c(dtypes::float32, 0.0), {r});
  auto sum = b.assign(acc, acc + b.load(temp, r));
  b.end_range(r);
  b.store(out, g, sum);
  b.end_if(first);
  return b.build({rows, 1, 1}, {16, 1, 1});
}

// E_g_8: one 8-wide subgroup per workgroup; each lane loads its element, and every lane gets
// out = 10 * (lane 3's element) + (lane 6's), through SHUFFLE. With `running` < 8, lanes from
// `running` on return at once.
inline Program subgroup_shuffle(int64_t groups, int64_t running = 8) {
  ProgramBuilder b("E_" + std::to_string(groups) + "_8");
  auto out = b.global(dtypes::float32, groups * 8, true), in = b.global(dtypes::float32, groups * 8);
  auto g = b.special("gidx0", groups), l = b.special("lidx0", running);
  auto v = b.load(in, g * 8 + l);
  auto from3 = b.emit(UOp::make(Ops::SHUFFLE, dtypes::float32, {v}, int64_t(3)));
  auto from6 = b.emit(UOp::make(Ops::SHUFFLE, dtypes::float32, {v}, int64_t(6)));
  b.store(out, g * 8 + l, from3 * ProgramBuilder::c(dtypes::float32, 10.0) + from6);
  return b.build({groups, 1, 1}, {8, 1, 1});
}

// E_n_4: sum[4k..4k+3] = a + b as float32x4, rev = that sum's lanes reversed (GEP, VECTORIZE).
inline Program vec4_add(int64_t n) {
  ProgramBuilder b("E_" + std::to_string(n / 4) + "_4");
  auto sum = b.global(dtypes::float32, n, true), rev = b.global(dtypes::float32, n, true);
  auto x = b.global(dtypes::float32, n), y = b.global(dtypes::float32, n);
  auto i = b.special("gidx0", n / 4) * 4;
  auto a = b.load(x, i, nullptr, nullptr, 4), c = b.load(y, i, nullptr, nullptr, 4);
  auto s = a + c;
  b.store(sum, i, s);
  std::vector<UOpPtr> lanes;
  for (int64_t k = 3; k >= 0; --k)
    lanes.push_back(UOp::make(Ops::GEP, dtypes::float32, {s}, std::vector<int64_t>{k}));
  b.store(rev, i, UOp::make(Ops::VECTORIZE, dtypes::float32.vec(4), lanes));
  return b.build({n / 4, 1, 1}, {1, 1, 1});
}

// E_<op>_n: out[i] = op(a[i]) (unary), op(a[i], b[i]) (binary; bool out for comparisons), or
// CAST/BITCAST of a[i] to `to`.
inline Program unary_op(Ops op, DType d, int64_t n) {
  ProgramBuilder b(fmt_name(op, d, n));
  auto out = b.global(d, n, true), x = b.global(d, n);
  auto i = b.special("gidx0", n);
  b.store(out, i, b.load(x, i)->alu(op));
  return b.build({n, 1, 1}, {1, 1, 1});
}

inline Program binary_op(Ops op, DType d, int64_t n) {
  ProgramBuilder b(fmt_name(op, d, n));
  auto out = b.global(is_comparison(op) ? dtypes::bool_ : d, n, true), x = b.global(d, n),
       y = b.global(d, n);
  auto i = b.special("gidx0", n);
  auto a = b.load(x, i), c = b.load(y, i);
  b.store(out, i, a->alu(op, {c}));
  return b.build({n, 1, 1}, {1, 1, 1});
}

// out[i] = op(a[i], c) for a constant c.
inline Program binary_op_by(Ops op, DType d, int64_t n, int64_t c) {
  ProgramBuilder b(fmt_name(op, d, n) + "_const");
  auto out = b.global(d, n, true), x = b.global(d, n);
  auto i = b.special("gidx0", n);
  b.store(out, i, b.load(x, i)->alu(op, {UOp::const_(d, c)}));
  return b.build({n, 1, 1}, {1, 1, 1});
}

inline Program convert_op(Ops op, DType from, DType to, int64_t n) {
  ProgramBuilder b(fmt_name(op, from, n) + "_" + to.name());
  auto out = b.global(to, n, true), x = b.global(from, n);
  auto i = b.special("gidx0", n);
  b.store(out, i, UOp::make(op, to, {b.load(x, i)}));
  return b.build({n, 1, 1}, {1, 1, 1});
}

// ---- host buffers ----

using Bytes = std::vector<std::byte>;

template <class T>
Bytes to_bytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
std::vector<T> from_bytes(const Bytes& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(static_cast<void*>(v.data()), b.data(), v.size() * sizeof(T));
  return v;
}

inline std::vector<HostBuffer> host_buffers(std::vector<Bytes>& buffers) {
  std::vector<HostBuffer> spans;
  for (Bytes& b : buffers) spans.emplace_back(b);
  return spans;
}

inline void run_on_cpu(const Program& p, std::vector<Bytes>& buffers,
                       std::vector<int64_t> vars = {}) {
  std::vector<HostBuffer> spans = host_buffers(buffers);
  run_program(p, spans, vars);
}

}  // namespace vkg::test
