// Objects whose names hosted_names_small's kernel declares too, with
// other values and sizes: each kind g++ binds STB_GNU_UNIQUE unless built
// with -fno-gnu-unique.
#pragma once

#include <cstdint>

namespace names {

constexpr int64_t kTag = 200;  // the scene's `tag`
constexpr int kSize = 512;     // hosted_names_small: 8

inline int64_t tag = kTag;                                           // inline variable
inline int64_t &origin() { static int64_t v = kTag + 1; return v; }  // static local
template <typename T>
struct Table {
    static T values[kSize];
};
template <typename T>
T Table<T>::values[kSize] = {kTag + 2};                 // template static data member
inline thread_local int64_t stage[kSize] = {kTag + 3};  // inline thread_local

// Changed by every run: a later case must find them as declared.
inline int64_t runs = 0;
inline int64_t &calls() { static int64_t n = 0; return n; }

}  // namespace names
