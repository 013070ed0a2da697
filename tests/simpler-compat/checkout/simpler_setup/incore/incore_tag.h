/* simpler_setup/incore: the first include dir the original gives a kernel. */
#pragma once
#define INCORE_DIR_SEEN 1
