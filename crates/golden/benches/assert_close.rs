//! `assert_close` on two 64M-element f32 tensors with equal data (the pass
//! path), reported as bytes of input read per second (both tensors).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use scene_golden::{DType, FixtureSeed, Init, Tolerance, assert_close, make_fixture};

const N: usize = 64 << 20;

fn bench(c: &mut Criterion) {
    println!(
        "assert_close compares, on two 64M-element f32 tensors (bytes read per second): \
         equal data, data one ulp apart, equal data on one thread, against the ceiling of a \
         parallel bytewise equality check over the same memory (memcmp_ceiling)"
    );
    let seed = FixtureSeed {
        scene: "bench",
        case: "assert_close",
        tensor: "x",
        seed: 0,
    };
    let expected = make_fixture(
        DType::F32,
        &[N],
        &Init::Uniform {
            low: -1.0,
            high: 1.0,
        },
        &seed,
    );
    let actual = expected.clone();
    let tol = Tolerance::default_for(DType::F32);
    let mut g = c.benchmark_group("assert_close");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(2 * (N * 4) as u64));
    g.bench_function("f32_64M_equal", |b| {
        b.iter(|| assert_close("x", black_box(&actual), black_box(&expected), tol).is_ok())
    });
    // Close but not bit-equal (every element one ulp off): same pass path,
    // no shortcut from equal bits.
    let close_bytes: Vec<u8> = expected
        .bytes()
        .chunks_exact(4)
        .flat_map(|c| {
            f32::from_le_bytes([c[0], c[1], c[2], c[3]])
                .next_up()
                .to_le_bytes()
        })
        .collect();
    let close = scene_golden::Tensor::from_bytes(DType::F32, &[N], close_bytes).expect("same size");
    g.bench_function("f32_64M_close", |b| {
        b.iter(|| assert_close("x", black_box(&close), black_box(&expected), tol).is_ok())
    });
    assert!(assert_close("x", &close, &expected, tol).is_ok());
    // Same on one thread: shows whether a core keeps up with memory.
    let one = scene_golden::reference::golden_pool(1);
    g.bench_function("f32_64M_equal_1thread", |b| {
        b.iter(|| {
            one.install(|| assert_close("x", black_box(&actual), black_box(&expected), tol).is_ok())
        })
    });
    // Ceiling: a parallel bytewise equality check over the same memory.
    g.bench_function("memcmp_ceiling", |b| {
        use rayon::prelude::*;
        b.iter(|| {
            black_box(&actual)
                .bytes()
                .par_chunks(1 << 18)
                .zip(black_box(&expected).bytes().par_chunks(1 << 18))
                .all(|(x, y)| x == y)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
