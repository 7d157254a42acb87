// How the metrics listener reads an HTTP request line.
#include "daemon/metrics_listener.h"

#include <catch2/catch.hpp>

TEST_CASE("the metrics listener answers a request line by its method and path", "[daemon][metrics]") {
    using canopy::daemon::answer_request_line;
    CHECK(answer_request_line("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").status == 200);
    CHECK(answer_request_line("GET /metrics?name[]=up HTTP/1.0\r\n\r\n").status == 200);
    CHECK(answer_request_line("GET /metrics#top HTTP/1.0\r\n\r\n").status == 200);
    CHECK(answer_request_line("GET /metricsx HTTP/1.0\r\n\r\n").status == 404);
    CHECK(answer_request_line("GET / HTTP/1.0\r\n\r\n").status == 404);
    CHECK(answer_request_line("POST /metrics HTTP/1.0\r\n\r\n").status == 405);
    CHECK(answer_request_line("GET /metrics\r\n\r\n").status == 400);
    CHECK(answer_request_line("nonsense\r\n\r\n").status == 400);
    CHECK(answer_request_line("").status == 400);
}
