#pragma once
// The whole wire ABI of canopy in one include. See DESIGN.md section 2.

#include "protocol/descriptor.h"
#include "protocol/error.h"
#include "protocol/identity.h"
#include "protocol/overlap.h"
#include "protocol/task_args.h"
#include "protocol/tensor.h"
#include "protocol/wire_enum.h"
