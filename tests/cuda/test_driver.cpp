#include "cuda/driver.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <string>

using canopy::cuda::CudaError;
using canopy::cuda::Driver;

TEST_CASE("loading a missing driver library fails naming the library", "[cuda]") {
    try {
        (void)Driver::load("libcanopy-no-such-driver.so.1");
        FAIL("load succeeded");
    } catch (const CudaError& e) {
        const std::string what = e.what();
        CHECK(e.call() == "dlopen");
        CHECK(e.result() == canopy::cuda::DRIVER_NOT_LOADED);
        CHECK(what.find("libcanopy-no-such-driver.so.1") != std::string::npos);
        CHECK(what.find("NVIDIA driver") != std::string::npos);
    }
}

TEST_CASE("a library without the driver entry points is refused", "[cuda]") {
    // libc is always loadable and has no cuGetProcAddress_v2.
    try {
        (void)Driver::load("libc.so.6");
        FAIL("load succeeded");
    } catch (const CudaError& e) {
        CHECK(e.call() == "dlsym");
        CHECK(std::string(e.what()).find("cuGetProcAddress_v2") != std::string::npos);
    }
}

TEST_CASE("the real driver loads and counts devices", "[cuda][gpu]") {
    const Driver* driver = nullptr;
    try {
        driver = &Driver::get();
    } catch (const CudaError& e) {
        CANOPY_SKIP("no CUDA driver: " << e.what());
    }
    int count = -1;
    CANOPY_CU(*driver, cuDeviceGetCount, &count);
    CHECK(count >= 1);
    CHECK(driver->version() >= 12000);
}
