// The scheduler's containers (scheduler/detail): IdMap against std::unordered_map under random inserts and
// erases, CellPool lists, ReadyQueue order, BlockPool reuse.

#include "scheduler/detail/block_pool.h"
#include "scheduler/detail/cell_pool.h"
#include "scheduler/detail/id_map.h"
#include "scheduler/detail/ready_queue.h"
#include "tests/sanitizers.h"

#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

using canopy::testing::property_cases;

using namespace canopy::scheduler::detail;

TEST_CASE("IdMap agrees with a std::unordered_map under random inserts and erases", "[scheduler]") {
    for (std::uint64_t seed = 1; seed <= property_cases(20); ++seed) {
        INFO("seed " << seed);
        std::mt19937_64 rng(seed);
        IdMap map;
        std::unordered_map<std::uint64_t, std::uint32_t> reference;
        // Consecutive ids, clustered ids and ids that collide in the low bits.
        auto draw = [&]() -> std::uint64_t {
            switch (rng() % 3) {
            case 0:
                return rng() % 512;
            case 1:
                return (rng() % 64) << 20;
            default:
                return rng();
            }
        };
        // The first disagreement, checked once per seed: Catch's cost per assertion under the sanitizers would
        // otherwise be most of the test's time (three assertions for each of 400 000 operations).
        std::string first_wrong;
        const auto expect = [&](bool agrees, int op, const char* what, std::uint64_t id) {
            if (!agrees && first_wrong.empty()) {
                first_wrong = "operation " + std::to_string(op) + ": " + what + " of id " + std::to_string(id);
            }
        };
        for (int op = 0; op < 20000 && first_wrong.empty(); ++op) {
            const std::uint64_t id = draw();
            if (rng() % 3 != 0) {
                const auto slot = static_cast<std::uint32_t>(rng() % 1000);
                const bool fresh = reference.emplace(id, slot).second;
                expect(map.insert(id, slot) == fresh, op, "insert", id);
            } else {
                expect(map.erase(id) == (reference.erase(id) == 1), op, "erase", id);
            }
            expect(map.size() == reference.size(), op, "size after", id);
            if (op % 97 == 0) {
                std::size_t wrong = 0;
                for (const auto& [key, slot] : reference) {
                    wrong += map.find(key) != slot ? std::size_t{1} : std::size_t{0};
                }
                expect(wrong == 0, op, "a sweep of every id found", 0);
            }
            const auto found = reference.find(id);
            expect(map.find(id) == (found == reference.end() ? std::nullopt : std::optional(found->second)), op, "find",
                   id);
        }
        REQUIRE(first_wrong == "");
        map.clear();
        CHECK(map.size() == 0);
        CHECK(map.find(1) == std::nullopt);
        CHECK(map.insert(1, 2));
        CHECK(map.find(1) == 2U);
    }
}

TEST_CASE("CellPool lists keep append order and reuse released cells", "[scheduler]") {
    CellPool<int> pool;
    List a;
    List b;
    for (int i = 0; i < 10; ++i) {
        pool.append(i % 2 == 0 ? a : b, i);
    }
    std::vector<int> seen;
    pool.for_each(a, [&](int v) { seen.push_back(v); });
    CHECK(seen == std::vector<int>{0, 2, 4, 6, 8});
    CHECK(b.size == 5);
    pool.release(a);
    CHECK(a.empty());
    // Released cells come back before the array grows.
    pool.reserve(5);
    List c;
    std::set<std::uint32_t> cells;
    for (int i = 0; i < 5; ++i) {
        cells.insert(pool.append(c, 100 + i));
    }
    CHECK(cells.size() == 5);
    CHECK(*cells.rbegin() < 10);
    seen.clear();
    pool.for_each(b, [&](int v) { seen.push_back(v); });
    CHECK(seen == std::vector<int>{1, 3, 5, 7, 9});
    pool.release(b);
    pool.release(c);
    pool.clear();
}

TEST_CASE("ReadyQueue hands out the smallest submission number first", "[scheduler]") {
    ReadyQueue q;
    std::mt19937_64 rng(3);
    std::multiset<std::uint64_t> reference;
    std::uint64_t next = 1;
    for (int op = 0; op < 5000; ++op) {
        switch (rng() % 3) {
        case 0: {
            q.reserve_added(1);
            q.push_added({next, 0});
            reference.insert(next++);
            break;
        }
        case 1: {
            if (next > 1) {
                const std::uint64_t older = 1 + rng() % (next - 1);
                q.reserve_woken(1);
                q.push_woken({older, 0});
                reference.insert(older);
            }
            break;
        }
        default: {
            const std::optional<ReadyQueue::Entry> e = q.pop();
            REQUIRE(e.has_value() == !reference.empty());
            if (e) {
                REQUIRE(e->seq == *reference.begin());
                reference.erase(reference.begin());
            }
        }
        }
    }
    q.clear();
    CHECK_FALSE(q.pop().has_value());
}

TEST_CASE("BlockPool hands a freed block out again", "[scheduler]") {
    BlockPool pool;
    void* a = pool.allocate(40);
    CHECK(pool.block_size() == 48);
    void* b = pool.allocate(40);
    CHECK(a != b);
    CHECK(reinterpret_cast<std::uintptr_t>(a) % 16 == 0);
    pool.deallocate(a);
    CHECK(pool.allocate(40) == a);
    // Nodes larger than a block go to the global allocator.
    using Big = std::array<char, 64>;
    using BigAllocator = PoolAllocator<std::pair<const int, Big>>;
    std::map<int, Big, std::less<int>, BigAllocator> map{BigAllocator(&pool)};
    for (int i = 0; i < 100; ++i) {
        map.emplace(i, Big{});
    }
    CHECK(map.size() == 100);
    map.clear();
    CHECK(pool.allocate(8) != nullptr);
}
