//! C++ kernels with the real host C++ compiler (`c++`, g++ here): templates
//! and `constexpr` build into images, and each construct the image rules
//! forbid fails its kernel with a message naming the rule.

mod common;

use std::num::NonZeroUsize;
use std::sync::Arc;

use common::{ORCH_SRC, Root, incore, orch, spec, toolchain};
use scene_kernels::rules::KernelRule;
use scene_kernels::{BuildOptions, Builder, CompileError, CoreType, ImageError, UnitFailure};

fn builder(root: &Root) -> Builder {
    let options = BuildOptions {
        workers: NonZeroUsize::new(2).expect("non-zero"),
        work_dir: None,
        cache: None,
        ..BuildOptions::default()
    };
    Builder::new(root.path(), toolchain(), options).expect("builder")
}

const TEMPLATE_KERNEL: &str = r#"#include "scene_kernel.h"
template <typename T, int N>
struct Scale {
    static constexpr T factor = T(N) * T(1.5);
    constexpr T operator()(T x) const { return x * factor; }
};
template <typename T>
constexpr T square(T x) { return x * x; }
static_assert(square(3) == 9, "constexpr");
constexpr float kTable[4] = {1.0f, 2.0f, 3.0f, 4.0f};  // .rodata, folded into .text

SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    Scale<float, 2> scale;
    SCENE_FOR_BLOCK_RANGE(ka, n, i) { x[i] = scale(square(x[i])) + kTable[i & 3]; }
}
"#;

const CXX_ORCH: &str = r#"#include "scene_orch.h"
template <uint32_t Blocks>
static int32_t submit_one(SceneOrchCtx *ctx, SceneOrchArg arg) {
    SceneTaskArg t[1] = { SCENE_INOUT(arg) };
    return scene_orch_submit(ctx, 0, Blocks, t, 1);
}
SCENE_ORCH_ENTRY(run_cxx_orch, ctx, args, nargs) {
    (void)nargs;
    return submit_one<4>(ctx, args[0]);
}
"#;

#[test]
fn template_and_constexpr_kernel_and_orchestration_build() {
    let root = Root::new();
    root.write("orch.cpp", CXX_ORCH);
    root.write("k.cpp", TEMPLATE_KERNEL);
    let s = spec(
        "cxx",
        orch("orch.cpp", "run_cxx_orch"),
        vec![incore("scale", 0, CoreType::Aiv, "k.cpp")],
    );
    let out = builder(&root).build_all(std::slice::from_ref(&s));
    let callable = match &out.callables[0] {
        Ok(c) => c.clone(),
        Err(e) => panic!("C++ kernel must build: {e}"),
    };
    let image = &callable.incore(0).expect("kernel 0").text;
    assert!(image.len() > 16, "an image of {} bytes", image.len());
    // The constexpr table is in the image (as .rodata folded into .text).
    let table: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|f| f.to_le_bytes())
        .collect();
    assert!(
        image.windows(table.len()).any(|w| w == table),
        "the constant table is carried in the image"
    );
    // The orchestration's template compiled: C++ through `c++`, and the
    // entry kept its C name through SCENE_ORCH_ENTRY's `extern "C"`.
    assert!(callable.orch_so.starts_with(b"\x7fELF"));
    let name = b"run_cxx_orch\0";
    assert!(callable.orch_so.windows(name.len()).any(|w| w == name));
}

#[test]
fn a_c_compiler_could_not_have_built_it() {
    // Guards the test above: the template source is C++ only, so its
    // success shows the C++ compiler was used. The same text as `.c` fails.
    let root = Root::new();
    root.write("orch.c", ORCH_SRC);
    root.write("k.c", TEMPLATE_KERNEL);
    let s = spec(
        "as_c",
        orch("orch.c", "run_orch"),
        vec![incore("scale", 0, CoreType::Aiv, "k.c")],
    );
    let err = builder(&root)
        .build(&s)
        .expect_err("C cannot parse templates");
    assert!(err.to_string().contains("failed to compile"), "{err}");
}

/// Builds a one-kernel callable from the C++ `source` and returns the
/// build's message and the kernel's error.
fn kernel_error(name: &str, source: &str) -> (String, Arc<CompileError>) {
    let root = Root::new();
    root.write("orch.c", ORCH_SRC);
    let file = format!("{name}.cpp");
    root.write(&file, source);
    let s = spec(
        name,
        orch("orch.c", "run_orch"),
        vec![incore(name, 0, CoreType::Aiv, &file)],
    );
    let err = builder(&root).build(&s).expect_err("breaks a rule");
    assert_eq!(err.failures.len(), 1, "{err}");
    let msg = err.to_string();
    match &err.failures[0] {
        UnitFailure::Incore { error, .. } => (msg, error.clone()),
        other => panic!("not a kernel failure: {other}"),
    }
}

/// The rule an error names, through shared wrappers.
fn rule(e: &CompileError) -> Option<KernelRule> {
    match e {
        CompileError::Rule { rule, .. } | CompileError::Image(ImageError::Rule { rule, .. }) => {
            Some(*rule)
        }
        CompileError::Shared(inner) => rule(inner),
        _ => None,
    }
}

fn is_writable_data(e: &CompileError) -> bool {
    match e {
        CompileError::Image(ImageError::WritableData { .. }) => true,
        CompileError::Shared(inner) => is_writable_data(inner),
        _ => false,
    }
}

#[test]
fn exceptions_fail_naming_the_rule() {
    let (msg, err) = kernel_error(
        "throws",
        r#"#include "scene_kernel.h"
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    if (x[0] < 0) throw 1;
    x[0] = 1.0f;
}
"#,
    );
    assert_eq!(rule(&err), Some(KernelRule::Exceptions), "{msg}");
    assert!(
        msg.contains(
            "kernel `throws` (func_id 0, aiv, throws.cpp) exceptions (throw/try/catch) are not allowed in kernels: failed to compile"
        ),
        "{msg}"
    );
    // The compiler's own words follow the rule.
    assert!(msg.contains("exception handling disabled"), "{msg}");
}

#[test]
fn rtti_fails_naming_the_rule() {
    let (msg, err) = kernel_error(
        "typeid",
        r#"#include "scene_kernel.h"
#include <typeinfo>
struct B { virtual float f() const { return 1.0f; } };
struct D : B { float f() const override { return 2.0f; } };
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    D d;
    const B &b = d;
    x[0] = typeid(b) == typeid(D) ? 1.0f : 0.0f;
}
"#,
    );
    assert_eq!(rule(&err), Some(KernelRule::Rtti), "{msg}");
    assert!(
        msg.contains("RTTI (typeid, dynamic_cast) is not allowed in kernels"),
        "{msg}"
    );
}

#[test]
fn a_static_constructor_fails_naming_the_rule() {
    let (msg, err) = kernel_error(
        "ctor",
        r#"#include "scene_kernel.h"
float seed(float x);
float seed(float x) { return x * 2.0f; }
// Not constexpr: initialised at load time, from .init_array.
static const float kSeed = seed(3.0f);
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    x[0] = kSeed;
}
"#,
    );
    assert_eq!(rule(&err), Some(KernelRule::StaticConstructors), "{msg}");
    assert!(
        msg.contains("static constructors are not allowed in kernels"),
        "{msg}"
    );
    assert!(msg.contains("`.init_array`"), "{msg}");
}

#[test]
fn a_static_constructor_of_a_class_fails_naming_the_rule() {
    let (msg, err) = kernel_error(
        "ctor_class",
        r#"#include "scene_kernel.h"
extern "C" float scene_external_value(void);
struct Acc { float v; Acc() : v(scene_external_value()) {} };
static Acc acc;
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    x[0] = acc.v;
}
"#,
    );
    assert_eq!(rule(&err), Some(KernelRule::StaticConstructors), "{msg}");
    assert!(
        msg.contains("static constructors are not allowed in kernels"),
        "{msg}"
    );
}

#[test]
fn a_libstdcxx_call_fails_naming_the_symbol_and_the_rule() {
    let (msg, err) = kernel_error(
        "terminate",
        r#"#include "scene_kernel.h"
#include <exception>
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    if (x[0] < 0) std::terminate();
    x[0] = 1.0f;
}
"#,
    );
    assert_eq!(rule(&err), Some(KernelRule::CxxRuntime), "{msg}");
    assert!(
        msg.contains(
            "the C++ standard library and runtime (libstdc++, libsupc++) are not linked into kernels"
        ),
        "{msg}"
    );
    assert!(msg.contains("`_ZSt9terminatev`"), "{msg}");
}

#[test]
fn operator_new_fails_naming_the_symbol_and_the_rule() {
    let (msg, err) = kernel_error(
        "heap",
        r#"#include "scene_kernel.h"
SCENE_KERNEL_ENTRY(ka) {
    float **out = SCENE_ARG_PTR(ka, 0, float *);
    *out = new float[SCENE_ARG_LEN(ka, 0, float *)];
}
"#,
    );
    assert_eq!(rule(&err), Some(KernelRule::DynamicAllocation), "{msg}");
    assert!(
        msg.contains("operator new/delete is not allowed in kernels"),
        "{msg}"
    );
    assert!(msg.contains("`_Znam`"), "{msg}");
}

#[test]
fn a_writable_global_fails_naming_the_rule() {
    let (msg, err) = kernel_error(
        "global",
        r#"#include "scene_kernel.h"
namespace { float total = 0.0f; }
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    total += x[0];
    x[0] = total;
}
"#,
    );
    assert!(is_writable_data(&err), "{msg}");
    assert!(
        msg.contains("writable globals/statics are not allowed"),
        "{msg}"
    );
}

/// The kernel math library links into images from C and from C++: no libm
/// call, no relocation, nothing writable (its constants are .rodata, folded
/// into the image).
#[test]
fn the_math_library_builds_into_c_and_cxx_images() {
    let body = r#"#include "scene_kernel.h"
SCENE_KERNEL_ENTRY(ka) {
    float *x = SCENE_ARG_PTR(ka, 0, float);
    uint64_t n = SCENE_ARG_LEN(ka, 0, float);
    SCENE_FOR_BLOCK_RANGE(ka, n, i) {
        float v = x[i];
        v = scene_expf(v) + scene_logf(v) + scene_sqrtf(v) + scene_rsqrtf(v) + scene_tanhf(v);
        v += scene_sigmoidf(v) + scene_siluf(v) + scene_geluf(v) + scene_erff(v);
        v += scene_powf(v, 1.5f) + scene_fabsf(v) + scene_fminf(v, 1.0f) + scene_fmaxf(v, 0.0f);
        x[i] = scene_floorf(v) + scene_ceilf(v);
    }
}
"#;
    let root = Root::new();
    root.write("orch.c", ORCH_SRC);
    root.write("math_c.c", body);
    root.write("math_cxx.cpp", body);
    for source in ["math_c.c", "math_cxx.cpp"] {
        let s = spec(
            source,
            orch("orch.c", "run_orch"),
            vec![incore("math", 0, CoreType::Aiv, source)],
        );
        let callable = builder(&root)
            .build(&s)
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        assert!(callable.incore(0).expect("kernel").text.len() > 256);
    }
}

/// A missing C++ compiler fails the C++ units, naming it; C units build.
#[test]
fn a_missing_cxx_compiler_is_named_by_the_cxx_units() {
    let root = Root::new();
    root.write("orch.c", ORCH_SRC);
    root.write("k.cpp", TEMPLATE_KERNEL);
    root.write("k.c", &common::kernel_src("+"));
    let options = BuildOptions {
        workers: NonZeroUsize::new(1).expect("non-zero"),
        work_dir: None,
        cache: None,
        ..BuildOptions::default()
    };
    let tc = toolchain().with_cxx("/no/such/c++");
    let builder = Builder::new(root.path(), tc, options).expect("C++ is not checked up front");
    let cxx = spec(
        "cxx",
        orch("orch.c", "run_orch"),
        vec![incore("k", 0, CoreType::Aiv, "k.cpp")],
    );
    let c = spec(
        "c",
        orch("orch.c", "run_orch"),
        vec![incore("k", 0, CoreType::Aiv, "k.c")],
    );
    let out = builder.build_all(&[cxx, c]);
    let err = out.callables[0].as_ref().expect_err("no C++ compiler");
    assert!(
        err.to_string()
            .contains("could not run C++ compiler `/no/such/c++`"),
        "{err}"
    );
    assert!(out.callables[1].is_ok(), "C units need no C++ compiler");
}
