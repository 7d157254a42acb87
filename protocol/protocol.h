#pragma once
// The whole wire ABI of canopy in one include. See docs/protocol.md.

#include "protocol/descriptor.h"
#include "protocol/error.h"
#include "protocol/identity.h"
#include "protocol/overlap.h"
#include "protocol/task_args.h"
#include "protocol/tensor.h"
#include "protocol/wire_enum.h"
