/*
 * Takes its arguments and does nothing. The orchestration submits it to
 * make a task that uses a buffer (with the direction it is given) without
 * touching its data, so the runtime has something to order accesses after.
 */
#include "scene_kernel.h"

SCENE_KERNEL_ENTRY(ka) { (void)ka; }
