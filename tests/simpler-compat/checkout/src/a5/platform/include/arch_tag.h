/* The a5 platform headers. */
#pragma once
#define ARCH_TAG 2
