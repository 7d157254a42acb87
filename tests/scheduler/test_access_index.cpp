// The access index and footprints (scheduler/detail): a query finds every indexed access that may share a
// byte with it (tensor_overlap != NONE and footprints not disjoint), through inserts, erases, parking and
// unparking, for random views including unbounded ones; footprints hold every byte of their view; column
// and row blocks of a matrix meet only their neighbours.

#include "scheduler/detail/access_index.h"
#include "tests/sanitizers.h"
#include "tests/scheduler/support.h"

#include <map>
#include <random>

using canopy::testing::property_cases;

using namespace canopy;
using namespace canopy::scheduler::detail;
using namespace canopy::test;

namespace {

struct Entry {
    Tensor view;
    bool writes;
    AccessIndex::Handle handle;
    bool live;
};

// A random view, not validated: any dtype, 1..3 axes, small or huge strides, and now and then one whose
// end offset saturates.
Tensor random_raw_view(std::mt19937_64& rng, const BufferDescriptor& buffer) {
    auto below = [&](std::uint64_t n) { return static_cast<std::uint32_t>(rng() % n); };
    static constexpr DataType DTYPES[] = {DataType::INT8, DataType::INT16, DataType::FLOAT32, DataType::FLOAT64};
    const DataType dtype = DTYPES[below(4)];
    const std::uint64_t offset = std::uint64_t{below(1024)} * element_size(dtype);
    if (below(20) == 0) {
        return raw_view(buffer, dtype, {2147483649U}, {2147483648U}, offset);
    }
    const std::uint32_t ndims = 1 + below(3);
    std::vector<std::uint32_t> shapes;
    std::vector<std::uint32_t> strides;
    for (std::uint32_t d = 0; d < ndims; ++d) {
        shapes.push_back(1 + below(8));
        strides.push_back(d + 1 == ndims ? 1 + below(2) : 1 + below(64));
    }
    return raw_view(buffer, dtype, shapes, strides, offset);
}

std::string describe(const Tensor& t) {
    std::string s = std::string(to_string(DataType{t.dtype})) + " offset " + std::to_string(t.byte_offset) + " shape";
    for (std::uint32_t d = 0; d < t.ndims; ++d) {
        s += " " + std::to_string(t.shapes[d]);
    }
    s += " strides";
    for (std::uint32_t d = 0; d < t.ndims; ++d) {
        s += " " + std::to_string(t.strides[d]);
    }
    return s;
}

AccessIndex::Handle insert(AccessIndex& index, const Tensor& view, bool writes, AccessRef ref) {
    return index.insert(view, footprint_of(view), writes, ref);
}

bool disjoint(const Tensor& a, const Tensor& b) {
    return footprints_disjoint(footprint_of(a), footprint_of(b));
}

// The accesses a query must find, and what it found, as position -> times visited.
void check_query(const AccessIndex& index, const std::vector<Entry>& entries, const Tensor& query, bool include_reads) {
    std::map<std::uint32_t, int> visited;
    index.for_each_candidate(query.buffer.identity, footprint_of(query), include_reads,
                             [&](AccessRef ref, const Tensor& view, Span bytes) {
                                 ++visited[ref.access];
                                 CHECK(view == entries.at(ref.access).view);
                                 CHECK(bytes.lo == byte_span(view).lo);
                                 CHECK(bytes.hi == byte_span(view).hi);
                             });
    for (const auto& [at, times] : visited) {
        INFO("entry " << at);
        CHECK(times == 1);
        REQUIRE(at < entries.size());
        CHECK(entries[at].live);
        CHECK((entries[at].writes || include_reads));
    }
    for (std::uint32_t i = 0; i < entries.size(); ++i) {
        const Entry& e = entries[i];
        if (e.live && (e.writes || include_reads) && tensor_overlap(query, e.view) != Overlap::NONE &&
            !disjoint(query, e.view)) {
            INFO("entry " << i << " (" << describe(e.view) << ") overlaps the query (" << describe(query) << ": "
                          << to_string(tensor_overlap(query, e.view)) << ") and was not found");
            CHECK(visited.count(i) == 1);
        }
    }
}

std::size_t count_candidates(const AccessIndex& index, const Tensor& query) {
    std::size_t n = 0;
    index.for_each_candidate(query.buffer.identity, footprint_of(query), true,
                             [&](AccessRef, const Tensor&, Span) { ++n; });
    return n;
}

} // namespace

TEST_CASE("the access index finds every access that may share a byte with the query", "[scheduler]") {
    const BufferDescriptor a = sched_buffer(1 << 20, 1);
    const BufferDescriptor b = sched_buffer(1 << 20, 2);
    for (std::uint64_t seed = 1; seed <= property_cases(40); ++seed) {
        INFO("seed " << seed);
        std::mt19937_64 rng(seed);
        AccessIndex index;
        std::vector<Entry> entries;
        for (std::uint32_t i = 0; i < 150; ++i) {
            const Tensor view = random_raw_view(rng, rng() % 4 == 0 ? b : a);
            const bool writes = rng() % 2 == 0;
            entries.push_back({view, writes, insert(index, view, writes, AccessRef{0, i}), true});
        }
        CHECK(index.size() == 150);
        for (int q = 0; q < 100; ++q) {
            check_query(index, entries, random_raw_view(rng, a), rng() % 2 == 0);
        }
        // Erase a third, park a third.
        std::vector<std::uint32_t> parked;
        for (std::uint32_t i = 0; i < entries.size(); ++i) {
            if (i % 3 == 0) {
                index.erase(entries[i].handle);
                entries[i].live = false;
            } else if (i % 3 == 1) {
                index.park(entries[i].handle);
                entries[i].live = false;
                parked.push_back(i);
            }
        }
        CHECK(index.size() == 50);
        for (int q = 0; q < 50; ++q) {
            check_query(index, entries, random_raw_view(rng, a), rng() % 2 == 0);
        }
        for (const std::uint32_t i : parked) {
            index.unpark(entries[i].handle);
            entries[i].live = true;
        }
        CHECK(index.size() == 100);
        for (int q = 0; q < 50; ++q) {
            check_query(index, entries, random_raw_view(rng, a), rng() % 2 == 0);
        }
        for (Entry& e : entries) {
            if (e.handle.buffer != nullptr) {
                index.erase(e.handle);
            }
        }
        CHECK(index.size() == 0);
        CHECK(index.buffers() == 0);
    }
}

TEST_CASE("a parked access keeps its buffer's entry until it is erased", "[scheduler]") {
    const BufferDescriptor a = sched_buffer(4096, 1);
    AccessIndex index;
    const Tensor view = make_tensor(a, DataType::FLOAT32, {16});
    AccessIndex::Handle h = insert(index, view, true, AccessRef{0, 0});
    index.park(h);
    CHECK(h.parked);
    CHECK(index.size() == 0);
    CHECK(index.buffers() == 1);
    CHECK(count_candidates(index, view) == 0);
    index.unpark(h);
    CHECK_FALSE(h.parked);
    CHECK(count_candidates(index, view) == 1);
    index.park(h);
    index.erase(h);
    CHECK(h.buffer == nullptr);
    CHECK(index.buffers() == 0);
    index.release_storage();
}

TEST_CASE("an unbounded view is found by every access from its offset on", "[scheduler]") {
    const BufferDescriptor a = sched_buffer(4096, 1);
    AccessIndex index;
    AccessIndex::Handle h =
        insert(index, raw_view(a, DataType::FLOAT32, {2147483649U}, {2147483648U}, 64), true, AccessRef{0, 0});
    CHECK(count_candidates(index, make_tensor(a, DataType::FLOAT32, {4}, {}, 64)) == 1);
    CHECK(count_candidates(index, make_tensor(a, DataType::FLOAT32, {4, 4}, {16, 1}, 1024)) == 1);
    CHECK(count_candidates(index, raw_view(a, DataType::INT8, {1}, {1}, UINT64_MAX - 8)) == 1);
    CHECK(count_candidates(index, make_tensor(a, DataType::FLOAT32, {4}, {}, 0)) == 0);
    index.erase(h);
}

TEST_CASE("pitched footprints and byte spans hold every byte of their view", "[scheduler]") {
    const BufferDescriptor a = sched_buffer(64, 1);
    std::mt19937_64 rng(7);
    int pitched = 0;
    const auto views = static_cast<int>(property_cases(3000));
    for (int n = 0; n < views; ++n) {
        const std::uint32_t elem = 1U << (rng() % 3);
        const DataType dtype = elem == 1 ? DataType::INT8 : (elem == 2 ? DataType::INT16 : DataType::FLOAT32);
        Tensor t{};
        try {
            t = make_tensor(a, dtype,
                            {1 + static_cast<std::uint32_t>(rng() % 4), 1 + static_cast<std::uint32_t>(rng() % 4)},
                            {1 + static_cast<std::uint32_t>(rng() % 12), 1 + static_cast<std::uint32_t>(rng() % 3)},
                            (rng() % 16) * elem);
        } catch (const WireError&) {
            continue;
        }
        const std::uint64_t bytes = byte_mask(t);
        const Span span = byte_span(t);
        const std::optional<Pitched> p = pitched_footprint(t);
        pitched += p.has_value();
        for (std::uint64_t b = 0; b < 64; ++b) {
            if ((bytes >> b & 1) == 0) {
                continue;
            }
            CHECK(span.lo <= b);
            CHECK(b < span.hi);
            if (p) {
                CHECK(spans_meet(p->rect.rows, {b / p->pitch, b / p->pitch + 1}));
                CHECK(spans_meet(p->rect.cols, {b % p->pitch, b % p->pitch + 1}));
            }
            for (std::uint64_t pitch = 1; pitch <= 24; ++pitch) {
                const Rect r = rect_of_span(span, pitch);
                CHECK(spans_meet(r.rows, {b / pitch, b / pitch + 1}));
                CHECK(spans_meet(r.cols, {b % pitch, b % pitch + 1}));
            }
        }
    }
    CHECK(pitched > views / 30);
}

TEST_CASE("column blocks and row blocks of a matrix meet only their neighbours in the index", "[scheduler]") {
    // A 64 x 4096 float32 matrix: 1024 column blocks of 4 columns, then 64 row blocks of a second matrix.
    const BufferDescriptor m = sched_buffer(64 * 4096 * 4, 1);
    AccessIndex index;
    std::vector<AccessIndex::Handle> handles;
    for (std::uint32_t c = 0; c < 1024; ++c) {
        handles.push_back(insert(index, matrix_block(m, 4096, 0, 4 * c, 64, 4), true, AccessRef{c, 0}));
    }
    CHECK(count_candidates(index, matrix_block(m, 4096, 0, 400, 64, 4)) == 1);
    CHECK(count_candidates(index, matrix_block(m, 4096, 3, 402, 8, 4)) == 2);
    // A single row as a 1-D view meets every block.
    CHECK(count_candidates(index, make_tensor(m, DataType::FLOAT32, {4096}, {}, 4096 * 4 * 5)) == 1024);
    const BufferDescriptor m2 = sched_buffer(64 * 4096 * 4, 2);
    for (std::uint32_t r = 0; r < 64; ++r) {
        handles.push_back(insert(index, matrix_block(m2, 4096, r, 0, 1, 4096), true, AccessRef{r, 1}));
    }
    CHECK(count_candidates(index, matrix_block(m2, 4096, 10, 0, 1, 4096)) == 1);
    CHECK(count_candidates(index, matrix_block(m2, 4096, 10, 0, 3, 4096)) == 3);
    CHECK(count_candidates(index, matrix_block(m2, 4096, 10, 100, 2, 8)) == 2);
    for (AccessIndex::Handle& h : handles) {
        index.erase(h);
    }
    CHECK(index.buffers() == 0);
}

TEST_CASE("footprints never call two views that share a byte disjoint", "[scheduler]") {
    const BufferDescriptor a = sched_buffer(64, 1);
    std::mt19937_64 rng(11);
    auto draw = [&]() -> std::optional<Tensor> {
        const std::uint32_t elem = 1U << (rng() % 3);
        const DataType dtype = elem == 1 ? DataType::INT8 : (elem == 2 ? DataType::INT16 : DataType::FLOAT32);
        const auto small = [&](std::uint64_t n) { return 1 + static_cast<std::uint32_t>(rng() % n); };
        try {
            if (rng() % 3 == 0) {
                return make_tensor(a, dtype, {small(16)}, {small(3)}, (rng() % 16) * elem);
            }
            return make_tensor(a, dtype, {small(4), small(4)}, {small(12), small(3)}, (rng() % 16) * elem);
        } catch (const WireError&) {
            return std::nullopt;
        }
    };
    int separated = 0;
    int sharing = 0;
    for (int n = 0; n < 20000; ++n) {
        const std::optional<Tensor> x = draw();
        const std::optional<Tensor> y = draw();
        if (!x || !y) {
            continue;
        }
        const bool share = (byte_mask(*x) & byte_mask(*y)) != 0;
        const bool proven = disjoint(*x, *y);
        CHECK(proven == disjoint(*y, *x));
        if (share) {
            ++sharing;
            CHECK_FALSE(proven);
        }
        separated += proven && tensor_overlap(*x, *y) != Overlap::NONE;
    }
    CHECK(sharing > 1000);
    CHECK(separated > 100); // pairs that footprints separate and tensor_overlap cannot
}
