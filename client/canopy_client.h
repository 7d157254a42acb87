#pragma once
// The canopy C++ client library: every header of its public surface. Build against it with
// find_package(canopy) and target_link_libraries(... canopy::client), or with `pkg-config canopy-client`
// (docs/client.md).

#include "client/buffer_mapping.h"
#include "client/connection.h"
#include "client/error.h"
#include "client/future.h"
#include "client/task.h"
#include "client/types.h"
