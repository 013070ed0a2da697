//! The kernel image rules a C++ (or C) construct can break, and the
//! diagnostics that name them.
//!
//! An incore image is copied to the device and entered at offset 0: nothing
//! runs before the entry (no static constructors), nothing is linked in
//! beyond the builtins (no C++ runtime: exceptions, RTTI, `operator new`,
//! libstdc++), and nothing is writable. The compiler's own error for a
//! construct the flags disable (`throw` under `-fno-exceptions`, `typeid`
//! under `-fno-rtti`) gets the rule in front of it; an object that needs
//! the C++ runtime or runs code before the entry is refused before the
//! link, with the symbols or sections that show it.

use std::fmt;

/// One rule of the kernel image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelRule {
    Exceptions,
    Rtti,
    StaticConstructors,
    StaticDestructors,
    DynamicAllocation,
    CxxRuntime,
}

impl fmt::Display for KernelRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KernelRule::Exceptions => "exceptions (throw/try/catch) are not allowed in kernels",
            KernelRule::Rtti => "RTTI (typeid, dynamic_cast) is not allowed in kernels",
            KernelRule::StaticConstructors => {
                "static constructors are not allowed in kernels \
                 (a global or local static with a non-constexpr initializer)"
            }
            KernelRule::StaticDestructors => {
                "static destructors are not allowed in kernels \
                 (a global with a non-trivial destructor)"
            }
            KernelRule::DynamicAllocation => {
                "operator new/delete is not allowed in kernels (no heap)"
            }
            KernelRule::CxxRuntime => {
                "the C++ standard library and runtime (libstdc++, libsupc++) \
                 are not linked into kernels"
            }
        })
    }
}

/// The rule behind a C++ compile error the kernel flags provoke, if any.
pub(crate) fn rule_of_compile_error(stderr: &str) -> Option<KernelRule> {
    // gcc: "exception handling disabled, use '-fexceptions' to enable";
    // clang: "cannot use 'throw' with exceptions disabled".
    if stderr.contains("exception handling disabled") || stderr.contains("exceptions disabled") {
        return Some(KernelRule::Exceptions);
    }
    // gcc: "cannot use 'typeid' with '-fno-rtti'", "'dynamic_cast' not
    // permitted with '-fno-rtti'"; clang: "use of typeid requires -frtti".
    if stderr.contains("-fno-rtti") || stderr.contains("requires -frtti") {
        return Some(KernelRule::Rtti);
    }
    None
}

/// The rule an undefined symbol of a kernel object breaks, if it is one of
/// the C++ runtime's (Itanium ABI names as they appear in ELF objects;
/// Mach-O names carry one more leading `_`).
pub fn rule_of_undefined(symbol: &str) -> Option<KernelRule> {
    let name = symbol;
    let starts = |p: &str| name.starts_with(p);
    if starts("__cxa_allocate_exception")
        || starts("__cxa_throw")
        || starts("__cxa_begin_catch")
        || starts("__cxa_end_catch")
        || starts("__cxa_rethrow")
        || starts("__cxa_free_exception")
        || starts("__gxx_personality")
        || starts("_Unwind_")
    {
        return Some(KernelRule::Exceptions);
    }
    if starts("__cxa_guard_") {
        return Some(KernelRule::StaticConstructors);
    }
    if starts("__cxa_atexit") || name == "atexit" || name == "__dso_handle" {
        return Some(KernelRule::StaticDestructors);
    }
    // operator new / new[] / delete / delete[], every overload.
    if starts("_Znw") || starts("_Zna") || starts("_Zdl") || starts("_Zda") {
        return Some(KernelRule::DynamicAllocation);
    }
    if starts("_ZTVN10__cxxabiv1") || starts("_ZTI") || starts("_ZTS") || starts("__dynamic_cast") {
        return Some(KernelRule::Rtti);
    }
    if starts("__cxa_")
        || starts("_ZSt")
        || starts("_ZNSt")
        || starts("_ZNKSt")
        || starts("_ZN9__gnu_cxx")
        || starts("_ZNK9__gnu_cxx")
    {
        return Some(KernelRule::CxxRuntime);
    }
    None
}

/// Sections whose presence means code runs before the entry.
pub(crate) fn is_constructor_section(name: &str) -> bool {
    name == ".init_array"
        || name.starts_with(".init_array.")
        || name == ".ctors"
        || name.starts_with(".ctors.")
        || name == ".preinit_array"
        || name == "__mod_init_func"
        || name == "__init_offsets"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_symbols_map_to_rules() {
        let cases = [
            ("__cxa_throw", Some(KernelRule::Exceptions)),
            ("_Unwind_Resume", Some(KernelRule::Exceptions)),
            ("__gxx_personality_v0", Some(KernelRule::Exceptions)),
            ("__cxa_guard_acquire", Some(KernelRule::StaticConstructors)),
            ("__cxa_atexit", Some(KernelRule::StaticDestructors)),
            ("_Znwm", Some(KernelRule::DynamicAllocation)),
            ("_ZdlPvm", Some(KernelRule::DynamicAllocation)),
            ("_ZTIi", Some(KernelRule::Rtti)),
            ("_ZSt9terminatev", Some(KernelRule::CxxRuntime)),
            ("__cxa_pure_virtual", Some(KernelRule::CxxRuntime)),
            ("memcpy", None),
            ("_GLOBAL_OFFSET_TABLE_", None),
            ("scene_expf", None),
        ];
        for (symbol, rule) in cases {
            assert_eq!(rule_of_undefined(symbol), rule, "{symbol}");
        }
    }

    #[test]
    fn compile_errors_name_their_rule() {
        let gcc = "k.cpp:1:9: error: exception handling disabled, use '-fexceptions' to enable";
        assert_eq!(rule_of_compile_error(gcc), Some(KernelRule::Exceptions));
        let clang = "k.cpp:1:9: error: cannot use 'throw' with exceptions disabled";
        assert_eq!(rule_of_compile_error(clang), Some(KernelRule::Exceptions));
        let gcc = "k.cpp:3:9: error: cannot use 'typeid' with '-fno-rtti'";
        assert_eq!(rule_of_compile_error(gcc), Some(KernelRule::Rtti));
        let clang = "k.cpp:3:9: error: use of typeid requires -frtti";
        assert_eq!(rule_of_compile_error(clang), Some(KernelRule::Rtti));
        assert_eq!(rule_of_compile_error("error: expected ';'"), None);
    }
}
