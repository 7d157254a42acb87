#pragma once
// Per-dtype element operations: the arithmetic every kernel is written in (docs/kernels.md, "Arithmetic").
//
// Each Ops type describes one DataType:
//   V                 the value type a kernel computes with (the raw bits for float16 / bfloat16)
//   load / store      memcpy from / to an element's address (no alignment assumed)
//   from_scalar       a scalar argument converted to the dtype
//   from_index        a logical index converted to the dtype
//   mul / add         one operation rounded once to the dtype (round to nearest even; integers wrap modulo 2^bits)
//   Acc, acc_add, from_acc   the reduce_sum accumulator: double for float dtypes, wrapping int64 for integers
// Float Ops also have Wide / widen / narrow: the matmul accumulator (float, or double for float64).
//
// float16 and bfloat16 multiply and add in double and round once to 16 bits: both operands are exact in
// double and double carries more than 2p + 2 significand bits, so the result equals the correctly rounded one.
//
// The translation units that instantiate these compile with -ffp-contract=off: a multiply followed by an add is
// two roundings, never one fused multiply-add.
//
// Thread safety: stateless.

#include "protocol/task_args.h"
#include "protocol/wire_enum.h"
#include "worker/kernels/detail/convert.h"
#include "worker/kernels/half.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace canopy::kernels::detail {

template <class T>
T load_as(const std::byte* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <class T>
void store_as(std::byte* p, T v) noexcept {
    std::memcpy(p, &v, sizeof v);
}

template <class T>
struct MemoryOps {
    using V = T;
    static V load(const std::byte* p) noexcept { return load_as<V>(p); }
    static void store(std::byte* p, V v) noexcept { store_as<V>(p, v); }
};

struct Float32Ops : MemoryOps<float> {
    using Acc = double;
    using Wide = float;
    static V from_double(double v) noexcept { return double_to_float(v); }
    static V from_scalar(const ScalarArg& s) noexcept { return from_double(s.to_double()); }
    static V from_index(std::uint64_t i) noexcept { return from_double(static_cast<double>(i)); }
    static V mul(V a, V b) noexcept { return a * b; }
    static V add(V a, V b) noexcept { return a + b; }
    static Acc acc_add(Acc acc, V v) noexcept { return acc + static_cast<double>(v); }
    static V from_acc(Acc acc) noexcept { return from_double(acc); }
    static Wide widen(V v) noexcept { return v; }
    static V narrow(Wide w) noexcept { return w; }
};

struct Float64Ops : MemoryOps<double> {
    using Acc = double;
    using Wide = double;
    static V from_scalar(const ScalarArg& s) noexcept { return s.to_double(); }
    static V from_index(std::uint64_t i) noexcept { return static_cast<double>(i); }
    static V mul(V a, V b) noexcept { return a * b; }
    static V add(V a, V b) noexcept { return a + b; }
    static Acc acc_add(Acc acc, V v) noexcept { return acc + v; }
    static V from_acc(Acc acc) noexcept { return acc; }
    static Wide widen(V v) noexcept { return v; }
    static V narrow(Wide w) noexcept { return w; }
};

// Format supplies to_float(bits), from_float(float) and from_double(double).
template <class Format>
struct Bits16Ops : MemoryOps<std::uint16_t> {
    using Acc = double;
    using Wide = float;
    static double to_double(V v) noexcept { return static_cast<double>(Format::to_float(v)); }
    static V from_scalar(const ScalarArg& s) noexcept { return Format::from_double(s.to_double()); }
    static V from_index(std::uint64_t i) noexcept { return Format::from_double(static_cast<double>(i)); }
    static V mul(V a, V b) noexcept { return Format::from_double(to_double(a) * to_double(b)); }
    static V add(V a, V b) noexcept { return Format::from_double(to_double(a) + to_double(b)); }
    static Acc acc_add(Acc acc, V v) noexcept { return acc + to_double(v); }
    static V from_acc(Acc acc) noexcept { return Format::from_double(acc); }
    static Wide widen(V v) noexcept { return Format::to_float(v); }
    static V narrow(Wide w) noexcept { return Format::from_float(w); }
};

struct Float16Format {
    static float to_float(std::uint16_t b) noexcept { return float16_to_float(b); }
    static std::uint16_t from_float(float v) noexcept { return float_to_float16(v); }
    static std::uint16_t from_double(double v) noexcept { return double_to_float16(v); }
};

struct BFloat16Format {
    static float to_float(std::uint16_t b) noexcept { return bfloat16_to_float(b); }
    static std::uint16_t from_float(float v) noexcept { return float_to_bfloat16(v); }
    static std::uint16_t from_double(double v) noexcept { return double_to_bfloat16(v); }
};

using Float16Ops = Bits16Ops<Float16Format>;
using BFloat16Ops = Bits16Ops<BFloat16Format>;

// Integer arithmetic runs in uint64 and keeps the low bits: two's complement wrap-around, without the
// undefined behaviour of signed overflow.
template <class I>
struct IntOps : MemoryOps<I> {
    using V = I;
    using Acc = std::uint64_t;
    static V from_scalar(const ScalarArg& s) noexcept {
        return s.kind == ScalarKind::INT64 ? int64_to_int<I>(s.as_i64()) : double_to_int<I>(s.to_double());
    }
    static V from_index(std::uint64_t i) noexcept { return uint64_to_int<I>(i); }
    static std::uint64_t bits(V v) noexcept { return static_cast<std::uint64_t>(static_cast<std::int64_t>(v)); }
    static V mul(V a, V b) noexcept { return static_cast<V>(bits(a) * bits(b)); }
    static V add(V a, V b) noexcept { return static_cast<V>(bits(a) + bits(b)); }
    static Acc acc_add(Acc acc, V v) noexcept { return acc + bits(v); }
    static V from_acc(Acc acc) noexcept { return static_cast<V>(acc); }
};

// Calls f(Ops{}) with the Ops of `dtype`. REQUIRES: is_valid(dtype).
template <class F>
decltype(auto) visit_dtype(DataType dtype, F&& f) {
    switch (dtype) {
    case DataType::FLOAT32:
        return f(Float32Ops{});
    case DataType::FLOAT16:
        return f(Float16Ops{});
    case DataType::BFLOAT16:
        return f(BFloat16Ops{});
    case DataType::FLOAT64:
        return f(Float64Ops{});
    case DataType::INT8:
        return f(IntOps<std::int8_t>{});
    case DataType::UINT8:
        return f(IntOps<std::uint8_t>{});
    case DataType::INT16:
        return f(IntOps<std::int16_t>{});
    case DataType::INT32:
        return f(IntOps<std::int32_t>{});
    case DataType::INT64:
        break;
    }
    return f(IntOps<std::int64_t>{});
}

} // namespace canopy::kernels::detail
