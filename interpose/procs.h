// What get_proc_address hands out in interposed mode: standin trampolines that
// unwrap their arguments and wrap their results around the real library's
// functions. Unknown names return NULL (a real function pointer would be a
// real-library pointer reaching the caller).
#pragma once

#include "interpose/wrap.h"

namespace standin::interpose {

void * proc_address(OuterReg & reg, const char * name);

} // namespace standin::interpose
