#pragma once
// Runs one built-in call on several workers of a live supervisor and compares what they wrote, byte for
// byte, with what a reference worker (a sim chip, whose CPU kernels are the contract) wrote for the same
// inputs.
//
// Each argument gets its own POSIX shm buffer, sized for its view plus slack on both sides. Buffers a call
// only reads are shared by every worker; buffers it writes exist once per worker, all starting from the same
// random bytes. After the runs, every byte of every written copy must equal the reference's, gaps between
// strided elements included (so nothing is written outside the view), with one exception docs/kernels.md
// allows: where scale, axpy, reduce_sum or matmul produce a float32 or float64 NaN, its payload may differ.

#include "chip_fixture.h"
#include "host_views.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>

namespace canopy::testing {

struct ViewSpec {
    ViewSpec(std::vector<std::uint32_t> shape_, std::vector<std::uint32_t> strides_ = {}, std::uint64_t offset_ = 0)
        : shape(std::move(shape_)), strides(std::move(strides_)), offset(offset_) {}

    std::vector<std::uint32_t> shape;
    std::vector<std::uint32_t> strides; // elements; empty: row-major
    std::uint64_t offset;               // elements
};

// What the random contents of a buffer look like.
enum class Values {
    GENERAL, // floats with ±0, ±inf, NaN, subnormals and extremes mixed in; 16-bit floats and integers: any bits
    FINITE,  // floats of moderate magnitude (|v| in [2^-20, 2^20) or 0) and no specials; integers: any bits
    SMALL,   // floats in [-4, 4]; integers: any bits
};

struct ArgSpec {
    ViewSpec view;
    TensorTag tag;
};

struct KernelCase {
    std::string kernel;
    DataType dtype;
    std::vector<ArgSpec> args;
    std::vector<ScalarArg> scalars;
    Values values = Values::GENERAL;
    std::string label;
};

inline std::vector<std::uint32_t> row_major(const std::vector<std::uint32_t>& shape) {
    std::vector<std::uint32_t> strides(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;) {
        strides[i - 1] = strides[i] * shape[i];
    }
    return strides;
}

// Strides that leave a gap after every row of every dimension.
inline std::vector<std::uint32_t> padded(const std::vector<std::uint32_t>& shape, std::uint32_t inner = 2) {
    std::vector<std::uint32_t> strides(shape.size(), inner);
    for (std::size_t i = shape.size(); i-- > 1;) {
        strides[i - 1] = strides[i] * shape[i] + 1;
    }
    return strides;
}

inline std::uint64_t extent_elements(const ViewSpec& v) {
    const auto strides = v.strides.empty() ? row_major(v.shape) : v.strides;
    std::uint64_t last = 0;
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
        last += std::uint64_t{v.shape[i] - 1} * strides[i];
    }
    return v.offset + last + 1;
}

inline Tensor tensor_of(const BufferDescriptor& d, DataType dtype, const ViewSpec& v) {
    Tensor t{};
    t.buffer = d;
    t.dtype = dtype;
    t.byte_offset = v.offset * element_size(dtype);
    t.ndims = static_cast<std::uint8_t>(v.shape.size());
    const auto strides = v.strides.empty() ? row_major(v.shape) : v.strides;
    for (std::size_t i = 0; i < v.shape.size(); ++i) {
        t.shapes[i] = v.shape[i];
        t.strides[i] = strides[i];
    }
    validate_tensor(t);
    return t;
}

inline bool is_float(DataType t) {
    return t == DataType::FLOAT32 || t == DataType::FLOAT64 || t == DataType::FLOAT16 || t == DataType::BFLOAT16;
}

// A random value of the kind asked for, as a double (for float32 / float64 buffers).
inline double random_double(std::mt19937_64& rng, Values values) {
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    if (values == Values::SMALL) {
        return 4.0 * unit(rng);
    }
    if (values == Values::GENERAL && rng() % 8 == 0) {
        static const double specials[] = {0.0,
                                          -0.0,
                                          std::numeric_limits<double>::infinity(),
                                          -std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::quiet_NaN(),
                                          -std::numeric_limits<double>::quiet_NaN(),
                                          1e-40,   // subnormal as a float
                                          -1e-310, // subnormal as a double
                                          3.4e38,
                                          -1.7e308,
                                          65504.0,
                                          65520.0,
                                          1e-7};
        return specials[rng() % std::size(specials)];
    }
    if (values == Values::FINITE && rng() % 16 == 0) {
        return 0.0;
    }
    return std::ldexp(unit(rng), static_cast<int>(rng() % 41) - 20);
}

inline void fill_random(std::span<std::byte> bytes, DataType dtype, Values values, std::mt19937_64& rng) {
    const std::size_t size = element_size(dtype);
    for (std::size_t i = 0; i + size <= bytes.size(); i += size) {
        if (dtype == DataType::FLOAT32) {
            const auto v = static_cast<float>(random_double(rng, values));
            std::memcpy(&bytes[i], &v, 4);
        } else if (dtype == DataType::FLOAT64) {
            const double v = random_double(rng, values);
            std::memcpy(&bytes[i], &v, 8);
        } else if ((dtype == DataType::FLOAT16 || dtype == DataType::BFLOAT16) && values != Values::GENERAL) {
            // Through float: the top half of a float is its bfloat16 truncation; float16 takes a small range.
            const double v = random_double(rng, values);
            std::uint16_t bits;
            if (dtype == DataType::BFLOAT16) {
                bits = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(v)) >> 16);
            } else {
                // A finite float16 (exponent field 0..30), sign and fraction random, magnitude below 2^(e-15+1).
                const auto exponent = static_cast<std::uint16_t>(values == Values::SMALL ? rng() % 17 : rng() % 31);
                bits = static_cast<std::uint16_t>((rng() & 0x83FF) | (std::uint64_t{exponent} << 10));
            }
            std::memcpy(&bytes[i], &bits, 2);
        } else {
            const std::uint64_t r = rng();
            std::memcpy(&bytes[i], &r, size);
        }
    }
}

// Whether element bytes a and b (of dtype) count as equal for `kernel`.
inline bool same_element(const std::byte* a, const std::byte* b, DataType dtype, const std::string& kernel) {
    const std::size_t size = element_size(dtype);
    if (std::memcmp(a, b, size) == 0) {
        return true;
    }
    const bool nan_payload_free = kernel == "scale" || kernel == "axpy" || kernel == "reduce_sum" || kernel == "matmul";
    if (nan_payload_free && dtype == DataType::FLOAT32) {
        float x, y;
        std::memcpy(&x, a, 4);
        std::memcpy(&y, b, 4);
        return std::isnan(x) && std::isnan(y);
    }
    if (nan_payload_free && dtype == DataType::FLOAT64) {
        double x, y;
        std::memcpy(&x, a, 8);
        std::memcpy(&y, b, 8);
        return std::isnan(x) && std::isnan(y);
    }
    return false;
}

inline std::string hex(const std::byte* p, std::size_t n) {
    std::string s = "0x";
    char buf[3];
    for (std::size_t i = n; i-- > 0;) {
        std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(p[i]));
        s += buf;
    }
    return s;
}

inline std::string describe(const KernelCase& c) {
    std::ostringstream out;
    out << c.kernel << " " << to_string(c.dtype) << " [" << c.label << "]";
    return out.str();
}

// Tallies across cases: how many compared, how many in which the reference changed a written buffer (a run
// where nothing was written would compare equal vacuously).
struct CaseStats {
    int cases = 0;
    int changed = 0;
    std::vector<std::string> unchanged; // descriptions of the cases whose reference wrote nothing new
};

// Runs `c` on each of `workers` and on `reference`; every written copy must equal the reference's.
inline void compare_case(daemon::Supervisor& sup, const std::vector<std::string>& workers, const std::string& reference,
                         const KernelCase& c, std::mt19937_64& rng, CaseStats& stats) {
    INFO(describe(c));
    const std::size_t esize = element_size(c.dtype);
    const std::size_t copies = workers.size() + 1; // the reference's copy is the last
    struct Arg {
        bool written;
        std::vector<BufferDescriptor> buffers; // one, or one per copy when written
        std::vector<ipc::MappedRegion> maps;
        std::vector<std::byte> initial;
    };
    std::vector<Arg> args;
    for (const ArgSpec& spec : c.args) {
        Arg a;
        a.written = spec.tag != TensorTag::INPUT;
        const std::uint64_t nbytes = (extent_elements(spec.view) + 16) * esize;
        a.initial.resize(nbytes);
        fill_random(a.initial, c.dtype, c.values, rng);
        for (std::size_t k = 0; k < (a.written ? copies : 1); ++k) {
            a.buffers.push_back(shm_buffer(sup, nbytes));
            a.maps.push_back(map_shm(a.buffers.back()));
            std::memcpy(a.maps.back().data(), a.initial.data(), nbytes);
        }
        args.push_back(std::move(a));
    }
    auto request = [&](const std::string& worker, std::size_t copy) {
        std::vector<TensorArg> tensors;
        for (std::size_t i = 0; i < c.args.size(); ++i) {
            const auto& buffers = args[i].buffers;
            const BufferDescriptor& d = buffers[args[i].written ? copy : 0];
            tensors.push_back({tensor_of(d, c.dtype, c.args[i].view), c.args[i].tag});
        }
        return task(c.kernel, worker, std::move(tensors), c.scalars);
    };
    const auto ref = sup.run(request(reference, copies - 1));
    INFO("reference " << reference << ": " << error_code_name(ref.code) << " " << ref.message);
    REQUIRE(ref.ok());
    for (std::size_t w = 0; w < workers.size(); ++w) {
        const auto r = sup.run(request(workers[w], w));
        INFO(workers[w] << ": " << error_code_name(r.code) << " " << r.message);
        REQUIRE(r.ok());
    }
    bool changed = false;
    for (const Arg& a : args) {
        if (!a.written) {
            continue;
        }
        const std::byte* expected = a.maps.back().data();
        changed = changed || std::memcmp(expected, a.initial.data(), a.initial.size()) != 0;
        for (std::size_t w = 0; w < workers.size(); ++w) {
            const std::byte* got = a.maps[w].data();
            for (std::size_t at = 0; at < a.initial.size(); at += esize) {
                if (!same_element(got + at, expected + at, c.dtype, c.kernel)) {
                    FAIL(workers[w] << " differs from " << reference << " at byte " << at << " (element " << at / esize
                                    << "): " << hex(got + at, esize) << " vs " << hex(expected + at, esize));
                }
            }
        }
    }
    ++stats.cases;
    stats.changed += changed ? 1 : 0;
    if (!changed) {
        stats.unchanged.push_back(describe(c));
    }
    for (const Arg& a : args) {
        for (const auto& d : a.buffers) {
            (void)sup.release_buffer(d.identity);
        }
    }
}

// The element-wise cases for one dtype: contiguous, strided (gaps, offsets, reshapes, 8 dimensions, dimensions of
// size 1, mergeable dimensions), and every scalar kind.
inline std::vector<KernelCase> elementwise_cases(DataType dtype) {
    const ViewSpec contiguous{{4099}, {}, 0};
    const ViewSpec strided3{{5, 6, 7}, padded({5, 6, 7}, 3), 7};
    const ViewSpec reshaped{{14, 15}, {17, 1}, 3}; // 210 elements, like strided3
    const std::vector<std::uint32_t> shape8{2, 2, 2, 2, 2, 2, 2, 3};
    const ViewSpec eight{shape8, padded(shape8), 1};
    const ViewSpec flat8{{384}, {}, 0};
    const ViewSpec ones{{1, 300, 1}, {1000, 3, 7}, 2};
    const ViewSpec mergeable{{4, 8, 16}, {256, 16, 1}, 5};
    const ViewSpec mergeable_flat{{512}, {2}, 1};
    using S = ScalarArg;
    const auto out = TensorTag::OUTPUT;
    const auto in = TensorTag::INPUT;
    const auto inout = TensorTag::INOUT;
    return {
        {"fill", dtype, {{contiguous, out}}, {S::f64(-1234.5678)}, Values::GENERAL, "contiguous, float64 scalar"},
        {"fill", dtype, {{strided3, out}}, {S::i64(300)}, Values::GENERAL, "strided 3-D, int64 scalar"},
        {"fill",
         dtype,
         {{eight, inout}},
         {S::f64(std::numeric_limits<double>::quiet_NaN())},
         Values::GENERAL,
         "8-D, NaN"},
        {"fill", dtype, {{mergeable, out}}, {S::f32(1e30f)}, Values::GENERAL, "mergeable, float32 1e30"},
        {"fill", dtype, {{ones, out}}, {S::i64(-5'000'000'000)}, Values::GENERAL, "size-1 dims, int64 -5e9"},
        {"iota", dtype, {{ViewSpec{{70001}, {}, 0}, out}}, {}, Values::GENERAL, "contiguous 70001"},
        {"iota", dtype, {{strided3, out}}, {}, Values::GENERAL, "strided 3-D"},
        {"iota", dtype, {{eight, out}}, {}, Values::GENERAL, "8-D"},
        {"copy", dtype, {{contiguous, in}, {contiguous, out}}, {}, Values::GENERAL, "contiguous"},
        {"copy", dtype, {{strided3, in}, {reshaped, out}}, {}, Values::GENERAL, "strided 3-D to reshaped 2-D"},
        {"copy", dtype, {{eight, in}, {flat8, inout}}, {}, Values::GENERAL, "8-D to contiguous"},
        {"scale", dtype, {{contiguous, inout}}, {S::f64(-2.5)}, Values::GENERAL, "contiguous, -2.5"},
        {"scale", dtype, {{strided3, inout}}, {S::i64(3)}, Values::GENERAL, "strided 3-D, int64 3"},
        {"scale", dtype, {{ones, inout}}, {S::f32(0.1f)}, Values::GENERAL, "size-1 dims, float32 0.1"},
        {"scale", dtype, {{mergeable, inout}}, {S::f64(2.9)}, Values::FINITE, "mergeable, 2.9"},
        {"axpy", dtype, {{contiguous, in}, {contiguous, inout}}, {S::f32(2.75f)}, Values::GENERAL, "contiguous"},
        // A negative factor saturates to 0 for uint8, which would leave y as it was.
        {"axpy",
         dtype,
         {{strided3, in}, {reshaped, inout}},
         {S::f64(dtype == DataType::UINT8 ? 3.25 : -3.25)},
         Values::FINITE,
         "strided, reshaped"},
        {"axpy", dtype, {{mergeable, in}, {mergeable_flat, inout}}, {S::i64(7)}, Values::GENERAL, "mergeable"},
    };
}

// reduce_sum cases for one dtype: contiguous at every alignment of its start (the 16-byte loads' head and
// tail), strided, 8-D, one element, long views, and specials.
inline std::vector<KernelCase> reduce_cases(DataType dtype) {
    const std::vector<std::uint32_t> shape8{2, 2, 2, 2, 2, 2, 2, 3};
    const ViewSpec y_scalar{{1}, {}, 3};
    const ViewSpec y_2d{{1, 1}, {5, 1}, 2};
    const auto in = TensorTag::INPUT;
    const auto out = TensorTag::OUTPUT;
    // float16's finite values reach 65504: their long sums would overflow to infinity on both sides.
    const Values finite = dtype == DataType::FLOAT16 ? Values::SMALL : Values::FINITE;
    std::vector<KernelCase> cases{
        {"reduce_sum", dtype, {{ViewSpec{{100003}, {}, 0}, in}, {y_scalar, out}}, {}, finite, "contiguous 100003"},
        {"reduce_sum",
         dtype,
         {{ViewSpec{{317, 331}, {700, 2}, 9}, in}, {y_2d, TensorTag::INOUT}},
         {},
         finite,
         "strided 2-D"},
        {"reduce_sum", dtype, {{ViewSpec{shape8, padded(shape8), 1}, in}, {y_scalar, out}}, {}, finite, "8-D"},
        {"reduce_sum", dtype, {{ViewSpec{{1}, {}, 5}, in}, {y_scalar, out}}, {}, finite, "one element"},
        {"reduce_sum", dtype, {{ViewSpec{{13}, {}, 1}, in}, {y_scalar, out}}, {}, finite, "13 elements, unaligned"},
        {"reduce_sum", dtype, {{ViewSpec{{4099}, {}, 0}, in}, {y_scalar, out}}, {}, Values::GENERAL, "with specials"},
        {"reduce_sum", dtype, {{ViewSpec{{(1u << 21) + 17}, {}, 0}, in}, {y_scalar, out}}, {}, finite, "2^21 + 17"},
    };
    for (std::uint64_t offset = 1; offset < 16 / element_size(dtype); ++offset) {
        cases.push_back({"reduce_sum",
                         dtype,
                         {{ViewSpec{{100003}, {}, offset}, in}, {y_scalar, out}},
                         {},
                         finite,
                         "contiguous 100003 at element offset " + std::to_string(offset)});
    }
    return cases;
}

// matmul cases for a float dtype: small, strided (a column-strided A, a transposed B, a padded C), and
// multi-tile with partial tiles.
inline std::vector<KernelCase> matmul_cases(DataType dtype) {
    const auto in = TensorTag::INPUT;
    const auto out = TensorTag::OUTPUT;
    constexpr std::uint32_t M = 37, K = 61, N = 29;
    return {
        {"matmul", dtype, {{{{M, K}}, in}, {{{K, N}}, in}, {{{M, N}}, out}}, {}, Values::SMALL, "37x61x29"},
        {"matmul",
         dtype,
         {{{{M, K}, {2 * K, 2}, 1}, in}, {{{K, N}, {1, K}, 0}, in}, {{{M, N}, {N + 3, 1}, 2}, TensorTag::INOUT}},
         {},
         Values::SMALL,
         "strided A, transposed B, padded C"},
        {"matmul",
         dtype,
         {{{{130, 257}}, in}, {{{257, 70}}, in}, {{{130, 70}}, out}},
         {},
         Values::FINITE,
         "130x257x70"},
    };
}

} // namespace canopy::testing
