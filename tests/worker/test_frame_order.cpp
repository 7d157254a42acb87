// FrameOrder: a frame ordered after earlier frames runs only when they succeeded; unknown predecessors and
// over-long lists are refused; the record covers the last MAILBOX_FRAMES frames.
#include "worker/frame_order.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace canopy;
using canopy::worker::FrameOrder;

namespace {

std::vector<std::uint64_t> slots(std::initializer_list<std::uint64_t> ids) {
    std::vector<std::uint64_t> v(MAX_FRAME_AFTER, 0);
    std::copy(ids.begin(), ids.end(), v.begin());
    return v;
}

} // namespace

TEST_CASE("a frame ordered after frames that succeeded may run", "[worker][order]") {
    FrameOrder order;
    order.record(1, ErrorCode::OK);
    order.record(2, ErrorCode::OK);
    const auto after = slots({1, 2});
    CHECK_FALSE(order.check(after, 2).has_value());
    CHECK_FALSE(order.check(after, 0).has_value());
}

TEST_CASE("a frame ordered after a failed frame fails DEPENDENCY_FAILED naming it", "[worker][order]") {
    FrameOrder order;
    order.record(1, ErrorCode::OK);
    order.record(2, ErrorCode::KERNEL_FAILED);
    const auto refusal = order.check(slots({1, 2}), 2);
    REQUIRE(refusal.has_value());
    CHECK(refusal->code == ErrorCode::DEPENDENCY_FAILED);
    CHECK(refusal->message == "dependency (task 2, on the same worker) failed: KERNEL_FAILED");
}

TEST_CASE("a frame ordered after a task the worker has not taken is refused", "[worker][order]") {
    FrameOrder order;
    order.record(1, ErrorCode::OK);
    const auto refusal = order.check(slots({7}), 1);
    REQUIRE(refusal.has_value());
    CHECK(refusal->code == ErrorCode::BAD_REQUEST);
    CHECK(refusal->message == "frame is ordered after task 7, which this worker has not taken");
}

TEST_CASE("a frame naming more predecessors than a frame holds is refused", "[worker][order]") {
    FrameOrder order;
    const auto refusal = order.check(slots({}), MAX_FRAME_AFTER + 1);
    REQUIRE(refusal.has_value());
    CHECK(refusal->code == ErrorCode::BAD_REQUEST);
    CHECK(refusal->message == "frame is ordered after 9 tasks; a frame names at most 8");
}

TEST_CASE("the record keeps the last MAILBOX_FRAMES frames", "[worker][order]") {
    FrameOrder order;
    order.record(1, ErrorCode::KERNEL_FAILED);
    for (std::uint64_t id = 2; id <= MAILBOX_FRAMES; ++id) {
        order.record(id, ErrorCode::OK);
    }
    CHECK(order.check(slots({1}), 1)->code == ErrorCode::DEPENDENCY_FAILED);
    order.record(MAILBOX_FRAMES + 1, ErrorCode::OK);
    CHECK(order.check(slots({1}), 1)->code == ErrorCode::BAD_REQUEST);
    CHECK_FALSE(order.check(slots({2, MAILBOX_FRAMES + 1}), 2).has_value());
}
